/// A tiny deterministic pseudo-random generator (SplitMix64, Steele, Lea and Flood 2014), so that
/// the randomized model tests replay the same operations on every run and every platform. Only
/// `next()` and `below(_:)` are used: the standard library's `random(in:using:)` algorithms are
/// not promised to stay the same across Swift versions.
struct SplitMix64 {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in 0..<bound (bound > 0). The modulo bias is irrelevant for tests.
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }

    /// True with probability percent / 100.
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
}
