// The Swift face of the JSON scanner (HTTPCore/json_scan.c): the pointers of a config, turned
// into C token arrays once, and what one scan of a body found.
import CHTTPCore
import FoundationEssentials
import Glibc
import PagingPluginKit

/// The pointers a body is scanned for: the items pointer first, then any others (cursor, next
/// URL, has_more, total...). Immutable C copies of their tokens, made once per instance.
final class ScanPlan: @unchecked Sendable {
    let pointers: [JSONPointer]
    /// Whether a scan validates the items too. Without, an array or object item that no other
    /// pointer enters is found by its brackets only (hj_scan): for a plan whose items all go to
    /// the host as they are, since the host validates every item it is handed.
    let checksItems: Bool
    private let tokenStorage: [UnsafeMutablePointer<CChar>]
    private let tokenArrays: [UnsafeMutablePointer<UnsafePointer<CChar>?>]
    private let lengthArrays: [UnsafeMutablePointer<Int>]
    private let cPointers: UnsafeMutablePointer<hj_pointer>

    init(_ pointers: [JSONPointer], checksItems: Bool = true) {
        self.pointers = pointers
        self.checksItems = checksItems
        var storage: [UnsafeMutablePointer<CChar>] = []
        var arrays: [UnsafeMutablePointer<UnsafePointer<CChar>?>] = []
        var lengths: [UnsafeMutablePointer<Int>] = []
        cPointers = .allocate(capacity: max(1, pointers.count))
        for (index, pointer) in pointers.enumerated() {
            let tokens = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: max(1, pointer.tokens.count))
            let lens = UnsafeMutablePointer<Int>.allocate(capacity: max(1, pointer.tokens.count))
            for (k, token) in pointer.tokens.enumerated() {
                let copy = strdup(token)!
                storage.append(copy)
                tokens[k] = UnsafePointer(copy)
                lens[k] = token.utf8.count
            }
            arrays.append(tokens)
            lengths.append(lens)
            cPointers[index] = hj_pointer(tokens: tokens, token_lens: lens, token_count: pointer.tokens.count)
        }
        tokenStorage = storage
        tokenArrays = arrays
        lengthArrays = lengths
    }

    deinit {
        tokenStorage.forEach { free($0) }
        tokenArrays.forEach { $0.deallocate() }
        lengthArrays.forEach { $0.deallocate() }
        cPointers.deallocate()
    }

    /// Validates `body` (its items too when `checkingItems`) and finds the values at the plan's
    /// pointers; the error says where the body stops being JSON.
    func scan(_ body: UnsafeBufferPointer<UInt8>, checkingItems: Bool? = nil) throws(ScanError) -> BodyScan {
        var result = hj_result()
        var error = [CChar](repeating: 0, count: 256)
        let check: Int32 = checkingItems ?? checksItems ? 1 : 0
        let rc = hj_scan(body.baseAddress, body.count, cPointers, pointers.count, check, &result, &error, error.count)
        guard rc == 0 else {
            hj_result_free(&result)
            throw ScanError(message: error.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        }
        return BodyScan(body: body, result: result)
    }
}

struct ScanError: Error {
    var message: String
}

/// What one scan found; its ranges point into the scanned body (valid as long as the body).
///
/// A class, immutable once made, so that a scan can be kept with the body it was made of (a
/// page fetched ahead is scanned when it comes, before it is asked for).
final class BodyScan: @unchecked Sendable {
    let body: UnsafeBufferPointer<UInt8>
    private let result: hj_result

    init(body: UnsafeBufferPointer<UInt8>, result: hj_result) {
        self.body = body
        self.result = result
    }

    deinit {
        var owned = result
        hj_result_free(&owned)
    }

    var itemCount: Int { result.item_count }

    /// Where the items pointer stops resolving, if it does: the problem (HJ_PATH_*), how many
    /// of its tokens resolved, and the value there (to the end of the body).
    var itemsPathProblem: (problem: Int32, depth: Int, value: UnsafeBufferPointer<UInt8>)? {
        guard result.items_path_problem != Int32(HJ_PATH_OK) else { return nil }
        return (result.items_path_problem, result.items_path_depth, UnsafeBufferPointer(rebasing: body[result.items_path_at...]))
    }

    /// The bytes of item `index` and whether they hold whitespace outside strings.
    func item(_ index: Int) -> (bytes: UnsafeBufferPointer<UInt8>, hasSpace: Bool) {
        let range = result.items[index]
        return (UnsafeBufferPointer(rebasing: body[range.start..<range.end]), result.item_has_space[index] != 0)
    }

    /// The bytes of the last value pointer `index` matched (the last duplicate member wins);
    /// through a "*", the last element's (nil when the last element has none: "/data/*/id"
    /// is the last item's id, not an earlier item's).
    func value(_ index: Int) -> UnsafeBufferPointer<UInt8>? {
        let count = result.match_counts[index]
        guard count > 0, result.not_in_last_element >> UInt64(index) & 1 == 0 else { return nil }
        let range = result.matches[index]![count - 1]
        return UnsafeBufferPointer(rebasing: body[range.start..<range.end])
    }
}

/// A JSON scalar, as the scanner's bytes: what pagination reads from a body.
enum JSONScalar: Equatable {
    case string(String)
    case number(String)
    case bool(Bool)
    case null
    case other

    /// `bytes` must be one valid JSON value (the scanner checked it).
    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let first = bytes.first else { self = .other; return }
        switch first {
        case UInt8(ascii: "\""):
            let inner = UnsafeBufferPointer(rebasing: bytes[1..<(bytes.count - 1)])
            if !inner.contains(UInt8(ascii: "\\")) {
                self = .string(String(decoding: inner, as: UTF8.self))
            } else if let text = try? JSONDecoder().decode(String.self, from: Data(bytes)) {
                self = .string(text)
            } else {
                self = .other
            }
        case UInt8(ascii: "t"): self = .bool(true)
        case UInt8(ascii: "f"): self = .bool(false)
        case UInt8(ascii: "n"): self = .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): self = .number(String(decoding: bytes, as: UTF8.self))
        default: self = .other
        }
    }

    /// As a key or cursor: strings as they are, numbers in their text; nil for null, "", and
    /// anything else.
    var cursorText: String? {
        switch self {
        case .string(let text): text.isEmpty ? nil : text
        case .number(let text): text
        default: nil
        }
    }

    /// As a count: an integer number or a string of digits.
    var integer: Int? {
        switch self {
        case .number(let text), .string(let text): Int(text)
        default: nil
        }
    }

    /// The text of a number or a string (a count written either way), nil for anything else.
    var countText: String? {
        switch self {
        case .number(let text), .string(let text): text
        default: nil
        }
    }
}

/// Copies the valid JSON `bytes` into `out` (at least as large) without whitespace outside
/// strings; returns the bytes written.
func hj_compactBytes(_ bytes: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
    guard let source = bytes.baseAddress, let target = out.baseAddress else { return 0 }
    return hj_compact(source, bytes.count, target)
}
