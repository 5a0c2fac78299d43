//! The engine's own timings of a request, as llama.cpp's `llama-server` reports them.
//!
//! llama-server adds a `timings` object to a completion response (in a stream: to the last
//! content event, next to `finish_reason`), measured on the server's clock:
//!
//! ```json
//! "timings": {"cache_n": 0, "prompt_n": 12, "prompt_ms": 18.2, "prompt_per_token_ms": 1.5,
//!             "prompt_per_second": 659.3, "predicted_n": 64, "predicted_ms": 480.0,
//!             "predicted_per_token_ms": 7.5, "predicted_per_second": 133.3}
//! ```
//!
//! Holding it next to what the client measured splits TTFT into engine prompt time and the
//! rest (network, server queue, client), and cross-checks TPOT against the engine's own.
//! Only the fields servelab uses are read; any field may be missing or of another type
//! (other engines, other versions), which yields `None` for that field, never an error.

use serde_json::Value;
use servelab_records::ServerTimings;

/// Cheap pre-filter so the hot path parses an event a second time only when it can hold
/// timings. Every event of a llama.cpp stream is small, but most carry no `timings`.
pub(crate) fn may_carry_timings(data: &str) -> bool {
    data.contains("\"timings\"")
}

/// The `timings` object of one event's data, if it has one with at least one known field.
/// Data that is not JSON, or a `timings` that is not an object, gives `None`.
pub fn from_event(data: &str) -> Option<ServerTimings> {
    if !may_carry_timings(data) {
        return None;
    }
    let v: Value = serde_json::from_str(data).ok()?;
    from_value(v.get("timings")?)
}

/// Reads a `timings` object. `None` when it is not an object or holds none of the fields.
pub(crate) fn from_value(t: &Value) -> Option<ServerTimings> {
    let t = t.as_object()?;
    let count = |k: &str| t.get(k).and_then(Value::as_u64);
    let millis = |k: &str| t.get(k).and_then(Value::as_f64).filter(|v| v.is_finite() && *v >= 0.0);
    let s = ServerTimings {
        prompt_tokens: count("prompt_n"),
        prompt_ms: millis("prompt_ms"),
        generated_tokens: count("predicted_n"),
        generation_ms: millis("predicted_ms"),
    };
    (s != ServerTimings::default()).then_some(s)
}

/// The engine's time per generated token, ms, as llama.cpp computes `predicted_per_token_ms`
/// (`predicted_ms / predicted_n`). `None` without both, or with no token.
#[cfg(test)]
pub(crate) fn per_token_ms(t: &ServerTimings) -> Option<f64> {
    let n = t.generated_tokens.filter(|n| *n > 0)?;
    Some(t.generation_ms? / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The last content event of a llama-server chat stream (shape as the server sends it).
    const LAST_CHAT_EVENT: &str = r#"{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1763730000,"id":"chatcmpl-x","model":"smollm2","system_fingerprint":"b1-x","object":"chat.completion.chunk","timings":{"cache_n":3,"prompt_n":29,"prompt_ms":41.25,"prompt_per_token_ms":1.42,"prompt_per_second":703.0,"predicted_n":64,"predicted_ms":448.0,"predicted_per_token_ms":7.0,"predicted_per_second":142.8}}"#;

    #[test]
    fn reads_the_four_fields_of_a_llama_server_event() {
        let t = from_event(LAST_CHAT_EVENT).unwrap();
        assert_eq!(
            t,
            ServerTimings {
                prompt_tokens: Some(29),
                prompt_ms: Some(41.25),
                generated_tokens: Some(64),
                generation_ms: Some(448.0),
            }
        );
        assert_eq!(per_token_ms(&t), Some(7.0));
    }

    #[test]
    fn events_without_timings_give_none_without_parsing() {
        let plain = r#"{"choices":[{"delta":{"content":"hi"}}],"object":"chat.completion.chunk"}"#;
        assert!(!may_carry_timings(plain));
        assert_eq!(from_event(plain), None);
        assert_eq!(from_event("not json \"timings\""), None);
        assert_eq!(from_event(r#"{"timings":[1,2]}"#), None);
        assert_eq!(from_event(r#"{"timings":{"other":1}}"#), None);
    }

    #[test]
    fn partial_or_odd_fields_keep_what_is_usable() {
        let t = from_event(r#"{"timings":{"prompt_n":5,"prompt_ms":-1,"predicted_ms":"x"}}"#);
        assert_eq!(t, Some(ServerTimings { prompt_tokens: Some(5), ..ServerTimings::default() }));
        assert_eq!(per_token_ms(&t.unwrap()), None);
        let zero = ServerTimings {
            generated_tokens: Some(0),
            generation_ms: Some(1.0),
            ..ServerTimings::default()
        };
        assert_eq!(per_token_ms(&zero), None);
    }
}
