//! [`PackedInts`]: unsigned integers stored in the fewest bits the largest needs, with
//! constant-time random access — the relocation view's slots, read once per moved row looked up.

/// A fixed-width bit-packed array of `u64`s.
#[derive(Debug, Clone, Default)]
pub struct PackedInts {
    width: u32,
    len: usize,
    words: Vec<u64>,
}

impl PackedInts {
    /// `values` packed at the width of their largest offset from the smallest.
    pub fn from_values(values: &[u64]) -> Self {
        let max = values.iter().copied().max().unwrap_or(0);
        let width = (u64::BITS - max.leading_zeros()).max(1);
        let bits = values.len() as u64 * width as u64;
        let mut words = vec![0u64; bits.div_ceil(64) as usize];
        for (i, &value) in values.iter().enumerate() {
            let bit = i as u64 * width as u64;
            let (word, shift) = ((bit / 64) as usize, (bit % 64) as u32);
            words[word] |= value << shift;
            if shift + width > 64 {
                words[word + 1] |= value >> (64 - shift);
            }
        }
        Self {
            width,
            len: values.len(),
            words,
        }
    }

    /// The `i`-th value. Panics if `i >= len()`, like slice indexing.
    pub fn get(&self, i: usize) -> u64 {
        assert!(i < self.len, "index {i} out of {}", self.len);
        let bit = i as u64 * self.width as u64;
        let (word, shift) = ((bit / 64) as usize, (bit % 64) as u32);
        let mut value = self.words[word] >> shift;
        if shift + self.width > 64 {
            value |= self.words[word + 1] << (64 - shift);
        }
        if self.width == 64 {
            value
        } else {
            value & ((1u64 << self.width) - 1)
        }
    }

    /// Values held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no value is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held on the heap.
    pub fn heap_size(&self) -> usize {
        self.words.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_width() {
        for width in [1u32, 3, 7, 20, 31, 32, 33, 63, 64] {
            let max = if width == 64 {
                u64::MAX
            } else {
                (1u64 << width) - 1
            };
            let values: Vec<u64> = (0..1000u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & max)
                .chain([max, 0])
                .collect();
            let packed = PackedInts::from_values(&values);
            assert!(packed.heap_size() <= (values.len() * width as usize).div_ceil(64) * 8 + 8);
            for (i, &v) in values.iter().enumerate() {
                assert_eq!(packed.get(i), v, "width {width}, index {i}");
            }
        }
        assert!(PackedInts::from_values(&[]).is_empty());
    }
}
