// Row 9: the JSON check of an item (JSONValidator), against copying the item, as the host does anyway.
import Foundation
import PagingHost

/// An item and 16 copies of it at distinct addresses (each on its own cache lines), so that
/// no call can be hoisted out of a loop.
final class ItemCopies {
    static let slots = 16
    let name: String
    let length: Int
    let stride: Int
    let storage: UnsafeMutableRawPointer
    let destination: UnsafeMutableRawPointer
    var kept: [[UInt8]]

    init(_ name: String, _ bytes: [UInt8]) {
        self.name = name
        length = bytes.count
        stride = (bytes.count + 63) & ~63
        storage = .allocate(byteCount: stride * Self.slots, alignment: 64)
        destination = .allocate(byteCount: stride * Self.slots, alignment: 64)
        kept = Array(repeating: [], count: Self.slots)
        for slot in 0..<Self.slots {
            bytes.withUnsafeBytes { (storage + slot * stride).copyMemory(from: $0.baseAddress!, byteCount: length) }
        }
    }

    deinit {
        storage.deallocate()
        destination.deallocate()
    }

    @inline(__always)
    func item(_ index: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: storage + (index & (Self.slots - 1)) * stride, count: length)
    }
}

/// `count` checks; ns a check.
@inline(never)
func checkLoop(_ copies: ItemCopies, count: Int) -> Double {
    var failures = 0
    let start = nowNs()
    for index in 0..<count where JSONValidator.validate(copies.item(index)) != nil {
        failures += 1
    }
    let ns = Double(nowNs() - start) / Double(count)
    precondition(failures == 0, "\(copies.name) is not valid JSON")
    return ns
}

/// `count` plain copies (memcpy) into a buffer of 16 slots; ns a copy.
@inline(never)
func copyLoop(_ copies: ItemCopies, count: Int) -> Double {
    var sink: UInt8 = 0
    let start = nowNs()
    for index in 0..<count {
        let slot = copies.destination + (index & (ItemCopies.slots - 1)) * copies.stride
        let item = copies.item(index)
        slot.copyMemory(from: item.baseAddress!, byteCount: item.count)
        sink &+= slot.load(fromByteOffset: item.count - 1, as: UInt8.self)
    }
    let ns = Double(nowNs() - start) / Double(count)
    precondition(sink == UInt8(truncatingIfNeeded: count) &* UInt8(ascii: "}"))
    return ns
}

/// `count` copies the host's way (`copyBytes`: a new [UInt8], kept until 16 copies later); ns a copy.
@inline(never)
func arrayCopyLoop(_ copies: ItemCopies, count: Int) -> Double {
    let start = nowNs()
    for index in 0..<count {
        copies.kept[index & (ItemCopies.slots - 1)] = Array(copies.item(index))
    }
    let ns = Double(nowNs() - start) / Double(count)
    precondition(copies.kept.allSatisfy { $0.count == copies.length })
    return ns
}

/// `count` parses into a tree (`JSONValue.parse`); ns a parse.
@inline(never)
func parseLoop(_ copies: ItemCopies, count: Int) -> Double {
    var objects = 0
    let start = nowNs()
    for index in 0..<count {
        if case .object = try? JSONValue.parse(copies.item(index)) { objects += 1 }
    }
    let ns = Double(nowNs() - start) / Double(count)
    precondition(objects == count, "\(copies.name) did not parse")
    return ns
}

/// The longest item of Examples/GitHubRepos/fixture/repositories.json (one object a line).
func githubFixtureItem() throws -> String {
    let path = "\(repositoryRoot)/Examples/GitHubRepos/fixture/repositories.json"
    let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        .filter { $0.hasPrefix("{") }.map { $0.hasSuffix(",") ? String($0.dropLast()) : String($0) }
    guard let longest = lines.max(by: { $0.utf8.count < $1.utf8.count }) else { throw BenchError("no items in \(path)") }
    return longest
}

/// The fixture item with more of the fields of the GitHub API's repository object: about 1 KB.
func githubAPIItem(_ fixtureItem: String) throws -> String {
    let item = try JSONValue.parse(fixtureItem)
    guard case .string(let fullName)? = item["full_name"], case .int(let id)? = item["id"], fixtureItem.hasSuffix("}") else {
        throw BenchError("unexpected fixture item \(fixtureItem)")
    }
    let owner = fullName.split(separator: "/").first.map(String.init) ?? fullName
    return String(fixtureItem.dropLast()) + #"""
    , "node_id": "MDEwOlJlcG9zaXRvcnk\#(id)", "private": false, "fork": false, "url": "https://api.github.com/repos/\#(fullName)", \#
    "homepage": "https://\#(owner).github.io", "size": 18234, "created_at": "2016-03-01T17:27:26Z", \#
    "updated_at": "2024-05-30T08:11:02Z", "pushed_at": "2024-05-29T21:40:13Z", "watchers_count": 126, \#
    "open_issues_count": 17, "has_issues": true, "has_wiki": true, "archived": false, "default_branch": "main", \#
    "license": {"key": "apache-2.0", "name": "Apache License 2.0", "spdx_id": "Apache-2.0"}, \#
    "topics": ["swift", "server-side-swift", "concurrency", "linux"], "score": 1.0}
    """#
}

func benchJSONCheck(_ report: Report) async throws {
    progress("row 9: JSON item check")
    let fixtureItem = try githubFixtureItem()
    let items = [
        ItemCopies("small", Array(#"{"id":123,"name":"item-123","title":"A small item of a page"}"#.utf8)),
        ItemCopies("fixture", Array(fixtureItem.utf8)),
        ItemCopies("api", Array(try githubAPIItem(fixtureItem).utf8)),
    ]
    for copies in items {
        if let error = JSONValidator.validate(copies.item(0)) { throw BenchError("the \(copies.name) item: \(error)") }
    }
    var variants: [Variant] = []
    for copies in items {
        variants.append(Variant("check-\(copies.name)") { checkLoop(copies, count: $0) })
        variants.append(Variant("copy-\(copies.name)") { copyLoop(copies, count: $0) })
        variants.append(Variant("array-\(copies.name)") { arrayCopyLoop(copies, count: $0) })
        variants.append(Variant("parse-\(copies.name)") { parseLoop(copies, count: $0) })
    }
    try await measureInterleaved(&variants, rounds: 5, budget: 0.1, minCount: 10_000, maxCount: 50_000_000)
    func m(_ name: String) -> Double { variants.first { $0.name == name }!.median }

    let labels = [
        ("9a", "JSON item check (`JSONValidator.validate`): small item"),
        ("9b", "… GitHub fixture item (the longest of repositories.json)"),
        ("9c", "… GitHub API-sized repository item (the fixture item with more of the API's fields)"),
    ]
    for (copies, (id, what)) in zip(items, labels) {
        let check = m("check-\(copies.name)"), copy = m("copy-\(copies.name)")
        let array = m("array-\(copies.name)"), parse = m("parse-\(copies.name)")
        let perByte = check / Double(copies.length)
        let ok = perByte <= 2
        report.add(id, "\(what), \(copies.length) bytes", "\(fmt(check, 1)) ns/item; \(fmt(perByte, 2)) ns/byte",
                   target: "≤ 2 ns/byte", verdict(ok),
                   "\(fmt(check / copy, 1))× a memcpy of the item (\(fmt(copy, 1)) ns); \(fmt(check / array, 2))× the host's copy into a new [UInt8] (\(fmt(array, 1)) ns); JSONValue.parse (a tree) \(fmt(parse, 0)) ns = \(fmt(parse / check, 1))× the check")
        if !ok { report.miss("\(id) (JSON check, \(fmt(perByte, 2)) ns/byte): one pass over the bytes, strings 8 bytes at a time") }
    }
}
