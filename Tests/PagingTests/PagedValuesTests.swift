@testable import Paging
import Testing

@Suite("PagedValues")
struct PagedValuesTests {
    func page(_ key: Int, _ values: [Int]) -> Page<Int, Int> {
        Page(request: PagingRequest(kind: .append, keyChain: PagingKeyChain(key: key),
                                    params: PagingRequestParams(pageSize: values.count)), values: values)
    }

    @Test func randomEdits_matchAnArrayOfPages() {
        var generator = SplitMix(seed: 42)
        var values = PagedValues<Int, Int>()
        var model: [[Int]] = []
        var next = 0
        for _ in 0..<5_000 {
            let size = Int(generator.next() % 4) + 1
            let fresh = Array(next ..< next + size)
            next += size
            switch generator.next() % 6 {
            case 0, 1:
                values = values.appending(page(next, fresh)); model.append(fresh)
            case 2:
                values = values.prepending(page(next, fresh)); model.insert(fresh, at: 0)
            case 3 where !model.isEmpty:
                values = values.droppingFirst(); model.removeFirst()
            case 4 where !model.isEmpty:
                values = values.droppingLast(); model.removeLast()
            case 5 where !model.isEmpty:
                values = values.replacingLast(with: page(next, fresh)); model[model.count - 1] = fresh
            default:
                break
            }
            let flat = model.flatMap { $0 }
            #expect(values.count == flat.count)
            #expect(values.pageCount == model.count)
            if let root = values.root {
                // An AVL tree of n pages is at most 1.44 log2(n + 2) high.
                #expect(Double(root.height) <= 1.45 * log2(Double(model.count + 2)) + 1)
            }
            if !flat.isEmpty {
                let probe = Int(generator.next() % UInt64(flat.count))
                #expect(values[probe] == flat[probe])
            }
        }
        #expect(Array(values) == model.flatMap { $0 })
        #expect(values.pages.map(\.values) == model)
    }

    @Test func snapshots_areUnaffectedByLaterEdits() {
        let first = PagedValues<Int, Int>().appending(page(0, [1, 2]))
        let second = first.appending(page(1, [3]))
        let third = second.droppingFirst()
        #expect(Array(first) == [1, 2])
        #expect(Array(second) == [1, 2, 3])
        #expect(Array(third) == [3])
    }
}

struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

private func log2(_ x: Double) -> Double {
    var result = 0.0
    var value = x
    while value >= 2 { value /= 2; result += 1 }
    return result + (value - 1)
}
