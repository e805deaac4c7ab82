use natal::rowid::{CarriedFragment, FragmentId, RelocationView, RowAddress, RowIdSequence};
fn main() {
    let mut x: u64 = 7;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for u in [100_000u64] {
        // u updates in 100 commits to 10M rows (10 fragments of 1M): each commit a new fragment.
        let per = (u / 100) as usize;
        let mut seqs = Vec::new();
        let mut carried = Vec::new();
        for c in 0..100u32 {
            let mut ids: Vec<u64> = (0..per)
                .map(|_| {
                    let r = next() % 10_000_000;
                    RowAddress::new((r / 1_000_000) as u32, (r % 1_000_000) as u32).as_u64()
                })
                .collect();
            ids.sort();
            let f: FragmentId = 10 + c;
            carried.push(CarriedFragment {
                id: f,
                physical_rows: per as u32,
            });
            seqs.push((f, RowIdSequence::from_ids(&ids)));
        }
        let t = std::time::Instant::now();
        let mut v = None;
        for _ in 0..300 {
            v = Some(RelocationView::build(
                &carried,
                seqs.iter().map(|(f, s)| (*f, s)),
            ));
        }
        println!(
            "U={u} build {:.2} ms heap {}",
            t.elapsed().as_secs_f64() * 1000.0 / 300.0,
            v.unwrap().heap_size()
        );
    }
}
