//! `Tokenizer::count` must equal `encode(..).len()` exactly, whatever shortcut it takes.

// Tests and benchmarks print the figures they measure.
#![allow(clippy::print_stderr, clippy::print_stdout)]

use std::path::Path;

use servelab_workload::Tokenizer;

fn smollm2() -> Tokenizer {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/smollm2-tokenizer.json");
    Tokenizer::from_path(&path).unwrap()
}

const TRICKY: &[&str] = &[
    "",
    " ",
    "Hello world",
    "Hello  world   with    runs of spaces and\ttabs\nand\n\nnewlines \n x",
    "numbers 12345 and 3.14159 and 1,000,000 apples",
    "don't won't it's we're they've I'm you'll he'd",
    "unicode: café naïve 日本語のテキスト 中文 emoji 😀👍 done",
    "code: fn main() { println!(\"hi {}\", x); } // comment",
    "special <|im_start|>user\nhi<|im_end|> and <|endoftext|> inside",
    "trailing space ",
    " leading space",
    "a\u{a0}b nbsp and\u{3000}ideographic space",
    "MiXeD CaSe WORDS And PUNCTUATION!!! ??? ...",
    "x",
    "  ab",
    "ab  ",
    "word.\n\nnext line\nand 42\nthen\r\nwindows\n",
    "日本\n語 and é\nx ends with newline\n",
    "- item one\n- item two\n\n```python\nprint(1)\n```\n",
];

#[test]
fn count_equals_encode_length_on_tricky_text() {
    let tok = smollm2();
    for text in TRICKY {
        assert_eq!(tok.count(text), tok.encode(text).len(), "{text:?}");
        // Twice: the second call is served from the word memo.
        assert_eq!(tok.count(text), tok.encode(text).len(), "{text:?}");
    }
}

#[test]
fn count_equals_encode_length_on_long_mixed_text() {
    let tok = smollm2();
    let mut text = String::new();
    for i in 0..400 {
        text.push_str(TRICKY[i % TRICKY.len()]);
        text.push_str(if i % 3 == 0 { " " } else { "" });
    }
    assert_eq!(tok.count(&text), tok.encode(&text).len());
    let exact = tok.encode(&text).len();
    assert!(exact > 4000, "{exact}");
}

#[test]
fn builtin_count_is_encode_length() {
    for name in servelab_workload::tokenizer::BUILTIN_ENCODINGS {
        let tok = Tokenizer::builtin(name).unwrap();
        for text in TRICKY {
            assert_eq!(tok.count(text), tok.encode(text).len(), "{name} {text:?}");
        }
        let long: String = TRICKY.iter().cycle().take(300).copied().collect::<Vec<_>>().join(" ");
        assert_eq!(tok.count(&long), tok.encode(&long).len(), "{name}");
    }
    assert_eq!(Tokenizer::builtin("cl100k_base").unwrap().count("hello world"), 2);
}

#[test]
fn sampleable_ids_exclude_special_tokens() {
    let tok = smollm2();
    let special = tok.special_ids();
    assert_eq!(special.len(), 17);
    let ids = tok.sampleable_ids();
    assert_eq!(ids.len(), 8000);
    assert!(ids.iter().all(|id| special.binary_search(id).is_err()));
    assert!(ids.iter().all(|&id| {
        let t = tok.decode(&[id]).unwrap();
        t.starts_with(' ') && t[1..].bytes().all(|b| b.is_ascii_alphabetic())
    }));
}
