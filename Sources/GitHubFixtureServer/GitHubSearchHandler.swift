// A GitHub-shaped `GET /search/repositories` endpoint backed by a fixture, for tests and offline demos.

import Foundation
import LoopbackHTTP

/// Errors from loading a repositories fixture.
public enum GitHubFixtureError: Error, Sendable, CustomStringConvertible {
    case notAnArrayOfObjects
    case missingField(index: Int, field: String)

    public var description: String {
        switch self {
        case .notAnArrayOfObjects: "fixture is not a JSON array of objects"
        case .missingField(let index, let field): "fixture item \(index) has no valid \"\(field)\""
        }
    }
}

/// One repository of the fixture: the fields the handler filters and sorts on, plus the item's JSON.
public struct GitHubFixtureRepository: Sendable {
    public let name: String
    public let description: String?
    public let stars: Int
    public let forks: Int
    /// The item serialized as compact JSON (keys sorted), exactly as it appears in responses.
    public let json: [UInt8]
    /// Lowercased UTF-8 of name + "\n" + description, precomputed for matching.
    let searchText: [UInt8]

    init(name: String, description: String?, stars: Int, forks: Int, json: [UInt8]) {
        self.name = name
        self.description = description
        self.stars = stars
        self.forks = forks
        self.json = json
        searchText = Array((name + "\n" + (description ?? "")).lowercased().utf8)
    }
}

/// A parsed repositories fixture (a JSON array of GitHub search "items").
public struct GitHubFixture: Sendable {
    public let repositories: [GitHubFixtureRepository]

    /// Parses a JSON array of GitHub search items. Each needs `name` and `stargazers_count`.
    public init(data: Data) throws {
        guard let array = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] else {
            throw GitHubFixtureError.notAnArrayOfObjects
        }
        try self.init(items: array)
    }

    /// Builds a fixture from already-decoded items.
    public init(items: [[String: Any]]) throws {
        var repositories: [GitHubFixtureRepository] = []
        repositories.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            guard let name = item["name"] as? String else { throw GitHubFixtureError.missingField(index: index, field: "name") }
            guard let stars = (item["stargazers_count"] as? NSNumber)?.intValue else {
                throw GitHubFixtureError.missingField(index: index, field: "stargazers_count")
            }
            let json = try JSONSerialization.data(withJSONObject: item, options: [.sortedKeys, .withoutEscapingSlashes])
            repositories.append(GitHubFixtureRepository(
                name: name, description: item["description"] as? String, stars: stars,
                forks: (item["forks_count"] as? NSNumber)?.intValue ?? 0, json: Array(json)))
        }
        self.repositories = repositories
    }

    /// Loads a fixture file.
    public init(contentsOfFile path: String) throws {
        try self.init(data: try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// A deterministic synthetic fixture of `count` repositories named `swift-repo-1`… (stars descending),
    /// for tests that do not want to depend on the fixture file.
    public static func synthetic(count: Int) -> GitHubFixture {
        let items: [[String: Any]] = (0..<count).map { i in
            let n = i + 1
            let owner = ["apple", "vapor", "swiftlang", "pointfreeco"][i % 4]
            return [
                "id": 1000 + n,
                "name": "swift-repo-\(n)",
                "full_name": "\(owner)/swift-repo-\(n)",
                "html_url": "https://github.com/\(owner)/swift-repo-\(n)",
                "description": "Synthetic Swift repository number \(n)",
                "stargazers_count": (count - i) * 10,
                "forks_count": count - i,
                "language": "Swift",
                "owner": ["login": owner],
            ]
        }
        // Cannot fail: every item has the required fields and only JSON-compatible values.
        return try! GitHubFixture(items: items)
    }
}

/// A handler serving `GET /search/repositories?q=…&sort=stars&order=desc&page=N&per_page=M` from the fixture
/// the way api.github.com does: 1-based `page` (default 1), `per_page` default 30 and at most 100, a body of
/// `{"total_count": N, "incomplete_results": false, "items": [...]}` and a `Link` header with absolute URLs
/// built from the request's `Host` (`rel="next"` and `rel="last"` unless on the last page, `rel="prev"` and
/// `rel="first"` unless on the first).
///
/// `q` matching: the first word that is not a `qualifier:value` (e.g. `swift` in `swift in:name,description`),
/// matched case-insensitively against name and description. A `q` of only qualifiers matches everything.
/// Missing `q` → 422 `{"message": "Validation Failed", ...}`; any other path → 404 `{"message": "Not Found"}`.
public func gitHubSearchHandler(fixture: GitHubFixture) -> @Sendable (HTTPRequest) -> HTTPResponse {
    let search = GitHubSearch(fixture: fixture)
    return { request in search.respond(to: request) }
}

/// Same as `gitHubSearchHandler(fixture:)` from the raw JSON of a fixture file.
public func gitHubSearchHandler(repositoriesJSON: Data) throws -> @Sendable (HTTPRequest) -> HTTPResponse {
    gitHubSearchHandler(fixture: try GitHubFixture(data: repositoriesJSON))
}

/// Same as `gitHubSearchHandler(fixture:)` from decoded items.
public func gitHubSearchHandler(repositories: [[String: Any]]) throws -> @Sendable (HTTPRequest) -> HTTPResponse {
    gitHubSearchHandler(fixture: try GitHubFixture(items: repositories))
}

struct GitHubSearch: Sendable {
    let fixture: GitHubFixture
    static let searchPath = "/search/repositories"
    static let qualifiers: [String] = [
        "in", "language", "user", "org", "repo", "stars", "forks", "topic", "topics", "is", "fork", "size",
        "pushed", "created", "license", "archived", "mirror", "followers", "sort",
    ]

    func respond(to request: HTTPRequest) -> HTTPResponse {
        var path = request.path
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        guard path == Self.searchPath, request.method == "GET" || request.method == "HEAD" else {
            return .json(#"{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}"#, status: 404)
        }
        guard let q = request.query["q"], !q.allSatisfy(\.isWhitespace) else {
            return .json(
                #"{"message":"Validation Failed","errors":[{"resource":"Search","field":"q","code":"missing"}],"#
                    + #""documentation_url":"https://docs.github.com/v3/search"}"#,
                status: 422)
        }

        var matches: [GitHubFixtureRepository]
        if let term = Self.searchTerm(in: q)?.lowercased() {
            let needle = Array(term.utf8)
            matches = needle.contains(10) ? [] : fixture.repositories.filter { Self.bytes($0.searchText, contain: needle) }
        } else {
            matches = fixture.repositories
        }
        let ascending = request.query["order"]?.lowercased() == "asc"
        switch request.query["sort"]?.lowercased() {
        case "stars":
            matches = stableSorted(matches, by: \.stars, ascending: ascending)
        case "forks", "help-wanted-issues":
            matches = stableSorted(matches, by: \.forks, ascending: ascending)
        default:
            break // "best match": fixture order
        }

        let perPage = min(100, max(1, request.query["per_page"].flatMap { Int($0) } ?? 30))
        let page = max(1, request.query["page"].flatMap { Int($0) } ?? 1)
        let total = matches.count
        let lastPage = max(1, (total + perPage - 1) / perPage)
        let start = min(total, (page - 1).multipliedReportingOverflow(by: perPage).overflow ? total : (page - 1) * perPage)
        let end = min(total, start + perPage)

        var body = Array(#"{"total_count":\#(total),"incomplete_results":false,"items":["#.utf8)
        for (offset, repository) in matches[start..<end].enumerated() {
            if offset > 0 { body.append(UInt8(ascii: ",")) }
            body += repository.json
        }
        body += Array("]}".utf8)

        let host = request.headers["host"].flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1"
        var links: [String] = []
        func link(_ target: Int, _ rel: String) {
            links.append("<http://\(host)\(Self.searchPath)?\(Self.query(request.queryItems, page: target))>; rel=\"\(rel)\"")
        }
        if page > 1 { link(min(page - 1, lastPage), "prev") }
        if page < lastPage {
            link(page + 1, "next")
            link(lastPage, "last")
        }
        if page > 1 { link(1, "first") }
        var headers: [(name: String, value: String)] = []
        if !links.isEmpty { headers.append(("Link", links.joined(separator: ", "))) }
        return .json(bytes: body, headers: headers)
    }

    private func stableSorted(_ items: [GitHubFixtureRepository], by key: KeyPath<GitHubFixtureRepository, Int>,
                              ascending: Bool) -> [GitHubFixtureRepository] {
        items.enumerated().sorted { a, b in
            let ka = a.element[keyPath: key], kb = b.element[keyPath: key]
            if ka != kb { return ascending ? ka < kb : ka > kb }
            return a.offset < b.offset
        }.map(\.element)
    }

    /// application/x-www-form-urlencoded: unreserved characters kept, space → "+", the rest %XX.
    static func formEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: " "):
                out += "+"
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded()
            }
        }
        return out
    }

    static func bytes(_ haystack: [UInt8], contain needle: [UInt8]) -> Bool {
        guard !needle.isEmpty else { return true }
        guard haystack.count >= needle.count else { return false }
        let first = needle[0]
        var i = 0
        let limit = haystack.count - needle.count
        while i <= limit {
            if haystack[i] == first {
                var j = 1
                while j < needle.count, haystack[i + j] == needle[j] { j += 1 }
                if j == needle.count { return true }
            }
            i += 1
        }
        return false
    }

    /// The free-text term of a search query: the first word that is not `qualifier:value`.
    /// Also copes with a missing space before a qualifier (`swiftin:name,description`).
    static func searchTerm(in q: String) -> String? {
        for word in q.split(whereSeparator: \.isWhitespace) {
            guard let colon = word.firstIndex(of: ":") else { return String(word) }
            let key = word[..<colon].lowercased()
            if qualifiers.contains(key) { continue }
            if let qualifier = qualifiers.first(where: { key.hasSuffix($0) && key.count > $0.count }) {
                return String(key.dropLast(qualifier.count))
            }
            return String(word)
        }
        return nil
    }

    /// The request's query re-encoded (form-style, like GitHub: `q=swift+in%3Aname%2Cdescription`) with `page`
    /// set to `page` (replaced in place, or appended). Encoding keeps commas out of `Link` URLs.
    static func query(_ items: [(name: String, value: String)], page: Int) -> String {
        var pairs: [String] = []
        var placed = false
        for (name, value) in items {
            if name == "page" {
                if !placed { pairs.append("page=\(page)") }
                placed = true
            } else {
                pairs.append(formEncode(name) + "=" + formEncode(value))
            }
        }
        if !placed { pairs.append("page=\(page)") }
        return pairs.joined(separator: "&")
    }
}

extension String {
    fileprivate func leftPadded() -> String { count < 2 ? "0" + self : self }
}
