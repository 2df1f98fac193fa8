import FoundationEssentials
import Paging
import PagingHost

/// The opaque cursors of `pager serve`: a direction, a page key and the request's user info,
/// signed with HMAC-SHA256 under the server's secret, so that a client can hand back only what
/// a server of the same secret gave out (not a key of its own making), and base64url-encoded.
struct ServeCursor: Equatable {
    var kind: PagingRequestKind
    var key: PluginKey
    var userInfo: [String: String]

    /// The longest cursor accepted (and given out), in characters: it fits the 16 KiB query.
    static let maxLength = 16_000
    /// The most bytes of parameters a first page may have (names and values): they travel in
    /// each cursor, which must leave room for the key.
    static let maxUserInfoBytes = 4_096
    private static let version: UInt8 = 1
    private static let macLength = 32

    /// Why a cursor was refused; the message is for the client.
    struct Refused: Error {
        let message: String
    }

    func encoded(secret: [UInt8]) -> String {
        var payload: [UInt8] = [Self.version, kind == .prepend ? 2 : 1]
        func append(_ bytes: [UInt8]) {
            withUnsafeBytes(of: UInt32(bytes.count).littleEndian) { payload.append(contentsOf: $0) }
            payload.append(contentsOf: bytes)
        }
        append(key.bytes)
        withUnsafeBytes(of: UInt32(userInfo.count).littleEndian) { payload.append(contentsOf: $0) }
        for (name, value) in userInfo.sorted(by: { $0.key < $1.key }) {
            append(Array(name.utf8))
            append(Array(value.utf8))
        }
        payload += HMACSHA256.mac(key: secret, message: payload)
        return Self.base64url(Data(payload))
    }

    /// `data` in base64url without padding: a cursor's one spelling.
    private static func base64url(_ data: Data) -> String {
        data.base64EncodedString().replacing("+", with: "-").replacing("/", with: "_").replacing("=", with: "")
    }

    init(kind: PagingRequestKind, key: PluginKey, userInfo: [String: String]) {
        self.kind = kind
        self.key = key
        self.userInfo = userInfo
    }

    /// Reads a cursor a client sent; a refusal for one that is malformed or not signed with `secret`.
    init(_ text: String, secret: [UInt8]) throws(Refused) {
        guard text.utf8.count <= Self.maxLength else { throw Refused(message: "the cursor is longer than \(Self.maxLength) characters") }
        var base64 = text.replacing("-", with: "+").replacing("_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        // Read back only as written (found by a probe: the unused bits of the last character,
        // and padding, gave other spellings of a cursor, which defeated caches keyed by URL).
        guard let data = Data(base64Encoded: base64), data.count > Self.macLength + 2, Self.base64url(data) == text else {
            throw Refused(message: "the cursor is not one this server gave out")
        }
        let raw = [UInt8](data)
        let payload = Array(raw.dropLast(Self.macLength)), mac = Array(raw.suffix(Self.macLength))
        guard HMACSHA256.equal(mac, HMACSHA256.mac(key: secret, message: payload)) else {
            throw Refused(message: "the cursor is not one this server gave out (its signature does not match)")
        }
        // Signed with this server's secret, so written by `encoded`; read with every bound
        // checked all the same.
        var index = 2
        func u32() throws(Refused) -> Int {
            guard payload.count - index >= 4 else { throw Refused(message: "the cursor is truncated") }
            defer { index += 4 }
            return payload[index..<index + 4].reversed().reduce(0) { $0 << 8 | Int($1) }
        }
        func bytes() throws(Refused) -> [UInt8] {
            let count = try u32()
            guard payload.count - index >= count else { throw Refused(message: "the cursor is truncated") }
            defer { index += count }
            return Array(payload[index..<index + count])
        }
        guard payload[0] == Self.version, payload[1] == 1 || payload[1] == 2 else { throw Refused(message: "the cursor's version is unknown") }
        kind = payload[1] == 2 ? .prepend : .append
        key = PluginKey(bytes: try bytes())
        var userInfo: [String: String] = [:]
        for _ in 0..<min(try u32(), payload.count) {
            let name = String(decoding: try bytes(), as: UTF8.self)
            userInfo[name] = String(decoding: try bytes(), as: UTF8.self)
        }
        self.userInfo = userInfo
    }
}
