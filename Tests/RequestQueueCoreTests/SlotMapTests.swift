import Testing
import RequestQueueCore

/// SlotMap behaves as a dictionary from small ids: compared with one over a seeded random run of
/// sets, overwrites, removals and lookups (ids up to 300, so that the array grows several times).
@Suite struct SlotMapTests {
    @Test func matchesADictionary() {
        var rng = SplitMix64(seed: 7)
        var map = SlotMap<String>()
        var reference: [UInt64: String] = [:]
        for step in 0..<5000 {
            let id = rng.next() % 300
            switch rng.next() % 4 {
            case 0, 1:
                map[id] = "v\(step)"
                reference[id] = "v\(step)"
            case 2:
                #expect(map.removeValue(forKey: id) == reference.removeValue(forKey: id))
            default:
                map[id] = nil
                reference[id] = nil
            }
            #expect(map[id] == reference[id])
            #expect(map.count == reference.count)
        }
        #expect(map.keys == reference.keys.sorted())
        #expect(map.map(\.value) == reference.sorted { $0.key < $1.key }.map(\.value))
        #expect(map.isEmpty == reference.isEmpty)
    }

    @Test func emptyAndOutOfRange() {
        var map = SlotMap<Int>()
        #expect(map.isEmpty && map.count == 0 && map.keys.isEmpty)
        #expect(map[1_000_000] == nil)
        map[1_000_000] = nil
        #expect(map.removeValue(forKey: 5) == nil)
        map[3] = 30
        map[3] = 31
        #expect(map.count == 1 && map[3] == 31 && map[2] == nil && map[4] == nil)
        #expect(Array(map.map(\.key)) == [3])
        // Ids that are not slot numbers are never stored: no trap, no giant array.
        map[SlotMap<Int>.maxID + 1] = 1
        map[UInt64.max] = 2
        #expect(map[SlotMap<Int>.maxID + 1] == nil && map[UInt64.max] == nil && map.count == 1)
    }

    /// `address(of:)` (a prefetch hint) is where the value lies: consecutive ids `stride` apart.
    @Test func addressIsWhereTheValueLies() {
        var m = SlotMap<Int>()
        #expect(m.address(of: 0) == nil)
        for id: UInt64 in 0..<20 { m[id] = Int(id) * 7 }
        for id: UInt64 in 0..<20 {
            guard let address = m.address(of: id), let first = m.address(of: 0) else {
                Issue.record("no address for \(id)")
                continue
            }
            #expect(address.load(as: Int?.self) == Int(id) * 7)
            #expect(UInt(bitPattern: address) - UInt(bitPattern: first) == UInt(id) * SlotMap<Int>.stride)
        }
        #expect(m.address(of: 20) == nil)
    }
}
