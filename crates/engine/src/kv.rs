//! KV blocks of one worker, with an LRU prefix cache over free blocks.
//!
//! A block holding a full, computed prompt block with a known key stays findable after its
//! request frees it, until it is evicted. Allocation takes blocks with no cached content first,
//! then evicts cached free blocks least recently freed first (vLLM evicts strictly by its free
//! queue; taking uncached blocks first only keeps cached prefixes a little longer).

use std::collections::{HashMap, VecDeque};

/// Block index inside one worker's pool.
pub type BlockId = u32;

/// The blocks of one worker.
#[derive(Debug, Clone)]
pub struct BlockPool {
    total: u32,
    refs: Vec<u32>,
    key: Vec<Option<u64>>,
    /// Tick at which a cached block was last freed.
    freed_at: Vec<u64>,
    free_plain: Vec<BlockId>,
    /// Cached blocks in the order they were freed, `(tick, block)`: an entry is live while its
    /// block is still free and was freed at that tick; others are skipped and dropped
    /// (taking a block back off the list would otherwise be a search).
    free_cached: VecDeque<(u64, BlockId)>,
    /// Live entries of `free_cached`.
    free_cached_live: usize,
    cached: HashMap<u64, BlockId>,
    clock: u64,
}

impl BlockPool {
    /// A pool of `total` free blocks.
    pub fn new(total: u32) -> Self {
        let n = total as usize;
        Self {
            total,
            refs: vec![0; n],
            key: vec![None; n],
            freed_at: vec![0; n],
            // Reversed so that `pop` hands out block 0 first (readable traces).
            free_plain: (0..total).rev().collect(),
            free_cached: VecDeque::new(),
            free_cached_live: 0,
            cached: HashMap::new(),
            clock: 0,
        }
    }

    /// Total blocks.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Blocks that can be allocated now (cached free blocks included: they can be evicted).
    pub fn free(&self) -> usize {
        self.free_plain.len() + self.free_cached_live
    }

    /// Blocks held by requests.
    pub fn used(&self) -> usize {
        self.total as usize - self.free()
    }

    /// How many leading `keys` are cached, and how many of those are free (to be taken off the
    /// free list by [`Self::acquire`]).
    pub fn lookup(&self, keys: &[u64]) -> (usize, usize) {
        let mut hit = 0;
        let mut free = 0;
        for k in keys {
            match self.cached.get(k) {
                Some(&b) => {
                    hit += 1;
                    if self.refs[b as usize] == 0 {
                        free += 1;
                    }
                }
                None => break,
            }
        }
        (hit, free)
    }

    /// Takes a reference on the blocks of the first `n` keys (all cached, see [`Self::lookup`]).
    pub fn acquire(&mut self, keys: &[u64], n: usize, out: &mut Vec<BlockId>) {
        for k in &keys[..n] {
            let Some(&b) = self.cached.get(k) else { return };
            let i = b as usize;
            if self.refs[i] == 0 {
                // Its entry in `free_cached` goes stale.
                self.free_cached_live -= 1;
            }
            self.refs[i] += 1;
            out.push(b);
        }
    }

    /// Appends `n` fresh blocks to `out`, or returns false (and allocates none) if fewer are
    /// free.
    pub fn allocate(&mut self, n: usize, out: &mut Vec<BlockId>) -> bool {
        if n > self.free() {
            return false;
        }
        for _ in 0..n {
            let b = match self.free_plain.pop() {
                Some(b) => b,
                None => self.evict_oldest(),
            };
            self.refs[b as usize] = 1;
            out.push(b);
        }
        true
    }

    fn evict_oldest(&mut self) -> BlockId {
        // Called only when `free_plain` is empty and `free() > 0`: a live entry exists.
        while let Some((tick, b)) = self.free_cached.pop_front() {
            let i = b as usize;
            if self.refs[i] != 0 || self.freed_at[i] != tick {
                continue;
            }
            self.free_cached_live -= 1;
            if let Some(k) = self.key[i].take() {
                if self.cached.get(&k) == Some(&b) {
                    self.cached.remove(&k);
                }
            }
            return b;
        }
        0
    }

    /// Marks a full, computed block as holding `key` (a block with the same key already cached
    /// keeps the entry).
    pub fn register(&mut self, block: BlockId, key: u64) {
        if self.cached.contains_key(&key) {
            return;
        }
        self.cached.insert(key, block);
        self.key[block as usize] = Some(key);
    }

    /// Drops one reference on each block, last block first, so that a request's tail is
    /// evicted before its prefix.
    pub fn release(&mut self, blocks: &[BlockId]) {
        for &b in blocks.iter().rev() {
            let i = b as usize;
            self.refs[i] = self.refs[i].saturating_sub(1);
            if self.refs[i] > 0 {
                continue;
            }
            if self.key[i].is_some() {
                self.clock += 1;
                self.freed_at[i] = self.clock;
                self.free_cached.push_back((self.clock, b));
                self.free_cached_live += 1;
            } else {
                self.free_plain.push(b);
            }
        }
        // Stale entries pile up behind a live one that is never evicted (a pool larger than
        // the work): drop them once they outnumber the blocks.
        if self.free_cached.len() > 2 * self.total as usize + 64 {
            let (refs, freed_at) = (&self.refs, &self.freed_at);
            self.free_cached.retain(|&(t, b)| refs[b as usize] == 0 && freed_at[b as usize] == t);
        }
    }
}

/// Keys of the full engine blocks of one request's prompt under prefix caching: the
/// [`block_keys`] of its prefix hashes, then, for the blocks they do not cover (all of them
/// when the request has none), keys unique to the request. An engine with prefix caching
/// hashes every full block, shared or not (vLLM V1's block hashes, SGLang's radix tree), so a
/// request's own computed blocks stay findable after it frees them: a preempted request
/// resumes from what is still cached instead of recomputing its prompt, and one that cannot
/// grow stops being re-admitted while its own cached blocks are all the room there is.
pub fn request_block_keys(
    prompt: u32,
    hashes: &[u64],
    hash_block_tokens: u32,
    block_size: u32,
    request: u64,
) -> Vec<u64> {
    let mut keys = block_keys(prompt, hashes, hash_block_tokens, block_size);
    if block_size == 0 {
        return keys;
    }
    let full = (prompt / block_size) as usize;
    // A salt keeps these apart from keys mixed from prefix hashes of the same value.
    let seed = mix(request, 0x005E_ED0F_B10C);
    keys.extend((keys.len()..full).map(|j| mix(seed, j as u64)));
    keys
}

/// Mixes a prefix hash and an offset into one key (SplitMix64 finaliser).
fn mix(h: u64, offset: u64) -> u64 {
    let mut z = h ^ offset.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Keys of the full engine blocks of a prompt: engine block `j` (tokens `[j·bs, (j+1)·bs)`)
/// is keyed by the hash of the hash block holding its last token and that token's offset, so
/// equal keys mean equal prefixes when `hashes` are prefix hashes (as Mooncake's `hash_ids`).
/// Blocks past the hashed part of the prompt get no key.
pub fn block_keys(
    prompt: u32,
    hashes: &[u64],
    hash_block_tokens: u32,
    block_size: u32,
) -> Vec<u64> {
    if hashes.is_empty() || block_size == 0 {
        return Vec::new();
    }
    let hb = if hash_block_tokens == 0 { block_size } else { hash_block_tokens } as u64;
    let bs = u64::from(block_size);
    let full = u64::from(prompt) / bs;
    let mut keys = Vec::with_capacity(full as usize);
    for j in 0..full {
        let last = (j + 1) * bs - 1;
        let Some(&h) = hashes.get((last / hb) as usize) else { break };
        keys.push(mix(h, last % hb));
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocate_release_and_reuse_cached_prefix() {
        let mut p = BlockPool::new(4);
        let mut a = Vec::new();
        assert!(p.allocate(3, &mut a));
        assert_eq!(a, vec![0, 1, 2]);
        p.register(0, 100);
        p.register(1, 101);
        assert!(!p.allocate(2, &mut a), "only 1 free");
        p.release(&a);
        assert_eq!(p.free(), 4);
        // Both cached blocks are found, and both are free.
        assert_eq!(p.lookup(&[100, 101, 102]), (2, 2));
        let mut b = Vec::new();
        p.acquire(&[100, 101], 2, &mut b);
        assert_eq!(b, vec![0, 1]);
        assert_eq!(p.free(), 2);
        // Uncached blocks (2, 3) go first; the cache stays intact.
        assert!(p.allocate(2, &mut b));
        assert_eq!(p.lookup(&[100, 101]), (2, 0));
    }

    /// A pool of two blocks keyed 7 and 8, both freed: block 1 (the tail) first, then 0.
    fn two_cached_free_blocks() -> BlockPool {
        let mut p = BlockPool::new(2);
        let mut a = Vec::new();
        assert!(p.allocate(2, &mut a));
        p.register(0, 7);
        p.register(1, 8);
        p.release(&a);
        p
    }

    #[test]
    fn eviction_is_lru_tail_first() {
        let mut p = two_cached_free_blocks();
        let mut b = Vec::new();
        assert!(p.allocate(1, &mut b));
        assert_eq!(b, vec![1], "the tail block is evicted first");
        assert_eq!(p.lookup(&[7, 8]), (1, 1));
    }

    /// A cached block taken back off the free list leaves a stale entry there that eviction
    /// skips; the list stays bounded however often blocks cycle through it.
    #[test]
    fn reacquired_blocks_are_skipped_and_the_free_list_stays_bounded() {
        let mut p = two_cached_free_blocks(); // LRU order 1, 0
        let mut b = Vec::new();
        p.acquire(&[8], 1, &mut b); // block 1 back in use: its entry is stale
        assert_eq!((b.clone(), p.free()), (vec![1], 1));
        let mut c = Vec::new();
        assert!(p.allocate(1, &mut c));
        assert_eq!(c, vec![0], "the stale entry of block 1 is skipped");
        assert!(!p.allocate(1, &mut c));
        p.release(&c);
        p.release(&b);
        assert_eq!(p.free(), 2);
        for _ in 0..1000 {
            let mut d = Vec::new();
            p.acquire(&[8], 1, &mut d);
            p.release(&d);
        }
        assert!(p.free_cached.len() <= 2 * 2 + 64, "{}", p.free_cached.len());
        assert_eq!((p.free(), p.lookup(&[8])), (2, (1, 1)));
    }

    #[test]
    fn keys_follow_hash_blocks() {
        // 512-token hash blocks (Mooncake), 16-token engine blocks: 32 keys per hash id.
        let k = block_keys(1100, &[1, 2, 3], 512, 16);
        assert_eq!(k.len(), 68); // 1100 / 16 = 68 full blocks
        let same = block_keys(600, &[1, 9], 512, 16);
        assert_eq!(&k[..32], &same[..32]);
        assert_ne!(k[32], same[32]);
        assert!(block_keys(100, &[], 16, 16).is_empty());
        // Hashes covering only part of the prompt key only that part.
        assert_eq!(block_keys(100, &[5], 16, 16).len(), 1);
    }

    #[test]
    fn every_full_block_of_a_request_gets_a_key() {
        // Hashes cover the first 16-token block only: the other five get the request's own.
        let k = request_block_keys(100, &[5], 16, 16, 7);
        assert_eq!(k.len(), 6);
        assert_eq!(k[0], block_keys(100, &[5], 16, 16)[0]);
        // No hashes: every key is the request's own, the same for the same request ...
        let a = request_block_keys(100, &[], 16, 16, 7);
        assert_eq!(a.len(), 6);
        assert_eq!(a, request_block_keys(100, &[], 16, 16, 7));
        // ... and shared with no other request, nor with the hashed keys.
        let b = request_block_keys(100, &[], 16, 16, 8);
        assert!(a.iter().all(|x| !b.contains(x) && !k[..1].contains(x)));
        // A partial last block has no key.
        assert_eq!(request_block_keys(15, &[], 16, 16, 7).len(), 0);
    }
}
