import Foundation
import Paging
import PagingHost
import Testing

/// The filter plugin (Plugins/Filter/filter.c) through real dlopen: a manifest of the jsonlines
/// source and the filter, loaded as a Pipeline, or run with the built `pager`.
@Suite("The filter plugin")
struct FilterPluginTests {
    let log = LogRecorder()

    /// Items covering each kind of value, escaped and plain, present and missing.
    static let items = [
        #"{"id":1,"name":"café","n":10,"ok":true,"x":null,"tags":["swift","ios"]}"#,
        #"{"id":2,"name":"caf\u00e9","n":10.0,"ok":false,"x":1,"tags":["go"]}"#,
        #"{"id":3,"name":"cafe","n":1e1,"ok":"true","tags":[]}"#,
        #"{"id":4,"name":"Café au lait","n":-2.5,"x":"null","tags":"swift"}"#,
        #"{"id":5,"name":"quote \" and \\ backslash","n":"10","ok":null}"#,
    ]

    /// A pipeline of `lines` (a JSON Lines file) behind `interceptors` (manifest JSON objects).
    func pipeline(_ lines: [String], interceptors: [String], pageSize: Int = 50) throws -> Pipeline {
        let folder = scratchFolder()
        try (lines.joined(separator: "\n") + "\n").write(toFile: folder + "/data.jsonl", atomically: true, encoding: .utf8)
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [\(interceptors.joined(separator: ", "))],
         "page_size": \(pageSize)}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        return try Pipeline(manifest: try Manifest.load(path: folder + "/m.json"),
                            searchPath: PluginSearchPath(folders: [productsFolder]), sink: log.sink)
    }

    /// The first page of `lines` through one filter with `config` (JSON text).
    func filtered(_ config: String, _ lines: [String] = items, pageSize: Int = 50) async throws -> PluginPage {
        let pipeline = try pipeline(lines, interceptors: [#"{"plugin": "filter", "config": \#(config)}"#], pageSize: pageSize)
        return try await pipeline.pager.load(pipeline.pager.refreshRequest(params: pipeline.requestParams))
    }

    /// The ids of the items of `page` that a `where` of one condition keeps.
    func kept(_ condition: String) async throws -> [Int] {
        ids(try await filtered(#"{"where": [\#(condition)]}"#))
    }

    func ids(_ page: PluginPage) -> [Int] {
        page.values.compactMap { item in
            (try? JSONSerialization.jsonObject(with: Data(item.bytes)) as? [String: Any])?["id"] as? Int
        }
    }

    // MARK: - Conditions

    @Test func equals_comparesStringsNumbersBooleansAndNull_byValue() async throws {
        #expect(try await kept(#"{"pointer": "/name", "equals": "cafe"}"#) == [3])
        #expect(try await kept(#"{"pointer": "/n", "equals": 10}"#) == [1, 2, 3], "10, 10.0 and 1e1; not the string \"10\"")
        #expect(try await kept(#"{"pointer": "/n", "equals": 10.0}"#) == [1, 2, 3])
        #expect(try await kept(#"{"pointer": "/n", "equals": "10"}"#) == [5])
        #expect(try await kept(#"{"pointer": "/ok", "equals": true}"#) == [1], "not the string \"true\"")
        #expect(try await kept(#"{"pointer": "/ok", "equals": false}"#) == [2])
        #expect(try await kept(#"{"pointer": "/x", "equals": null}"#) == [1], "a missing value is not null, nor is \"null\"")
        #expect(try await kept(#"{"pointer": "/ok", "equals": null}"#) == [5])
    }

    @Test func strings_areComparedAfterDecodingEscapes_onBothSides() async throws {
        #expect(try await kept(#"{"pointer": "/name", "equals": "café"}"#) == [1, 2])
        #expect(try await kept(#"{"pointer": "/name", "equals": "caf\u00e9"}"#) == [1, 2])
        #expect(try await kept(#"{"pointer": "/name", "equals": "quote \" and \\ backslash"}"#) == [5])
        #expect(try await kept(#"{"pointer": "/name", "equals": "quote \u0022 and \u005c backslash"}"#) == [5])
        // Decoded, an escape is shorter than it is written: a raw match of the escape is not one.
        let raw = [#"{"id":1,"s":"a\nb"}"#, #"{"id":2,"s":"a\\nb"}"#]
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/s", "equals": "a\\nb"}]}"#, raw)) == [2])
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/s", "equals": "a\nb"}]}"#, raw)) == [1])
        // Characters beyond the BMP, as a surrogate pair or as UTF-8.
        let emoji = [#"{"id":1,"s":"\ud83d\ude00!"}"#, #"{"id":2,"s":"😀!"}"#, #"{"id":3,"s":"😀"}"#]
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/s", "equals": "😀!"}]}"#, emoji)) == [1, 2])
    }

    @Test func notEquals_holdsForOtherValues_otherTypes_andMissingOnes() async throws {
        #expect(try await kept(#"{"pointer": "/x", "not_equals": null}"#) == [2, 3, 4, 5])
        #expect(try await kept(#"{"pointer": "/n", "not_equals": 10}"#) == [4, 5])
    }

    @Test func contains_findsSubstrings_andArrayElements() async throws {
        #expect(try await kept(#"{"pointer": "/name", "contains": "au"}"#) == [4])
        #expect(try await kept(#"{"pointer": "/name", "contains": "é"}"#) == [1, 2, 4], "also in the escaped \\u00e9")
        #expect(try await kept(#"{"pointer": "/name", "contains": "\" and \\"}"#) == [5])
        #expect(try await kept(#"{"pointer": "/tags", "contains": "swift"}"#) == [1, 4], "an element of 1, a substring of 4")
        #expect(try await kept(#"{"pointer": "/tags", "contains": "sw"}"#) == [4], "an element must equal it")
        #expect(try await kept(#"{"pointer": "/name", "contains": ""}"#) == [1, 2, 3, 4, 5])
        let numbers = [#"{"id":1,"v":[1,2.0,"3"]}"#, #"{"id":2,"v":[3]}"#, #"{"id":3,"v":2}"#]
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "contains": 2}]}"#, numbers)) == [1])
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "contains": 3}]}"#, numbers)) == [2])
    }

    @Test func numericComparisons_matchNumbersOnly_exactly() async throws {
        #expect(try await kept(#"{"pointer": "/n", "greater_than": 5}"#) == [1, 2, 3], "not the string \"10\"")
        #expect(try await kept(#"{"pointer": "/n", "greater_than": 10}"#) == [])
        #expect(try await kept(#"{"pointer": "/n", "greater_or_equal": 10}"#) == [1, 2, 3])
        #expect(try await kept(#"{"pointer": "/n", "less_than": 0}"#) == [4])
        #expect(try await kept(#"{"pointer": "/n", "less_or_equal": -2.5}"#) == [4])
        #expect(try await kept(#"{"pointer": "/n", "less_or_equal": -2.6}"#) == [])
        // Integers beyond a double's 53 bits, and exponents, are compared exactly.
        let big = [#"{"id":1,"v":9007199254740993}"#, #"{"id":2,"v":9007199254740992}"#,
                   #"{"id":3,"v":-0.0}"#, #"{"id":4,"v":1.5E-300}"#, #"{"id":5,"v":-1e300}"#]
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "greater_than": 9007199254740992}]}"#, big)) == [1])
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "greater_than": 0}]}"#, big)) == [1, 2, 4])
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "equals": 0}]}"#, big)) == [3])
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "less_than": -1e299}]}"#, big)) == [5])
        // Beyond 64 bits and 17 digits: the manifest's number reaches the filter as written
        // (it was rounded to a Double on the way, and matched nothing).
        let huge = [#"{"id":1,"v":123456789012345678901234}"#, #"{"id":2,"v":123456789012345678901235}"#,
                    #"{"id":3,"v":0.12345678901234567891}"#, #"{"id":4,"v":0.12345678901234567892}"#]
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "equals": 123456789012345678901234}]}"#, huge)) == [1])
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "greater_than": 123456789012345678901234}]}"#, huge)) == [2])
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "equals": 0.12345678901234567892}]}"#, huge)) == [4])
        // Below the doubles: found by a probe, 1e-400 in the manifest reached the filter as 0.
        let tiny = [#"{"id":1,"v":0}"#, #"{"id":2,"v":1e-400}"#, #"{"id":3,"v":-1e-400}"#]
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "equals": 1e-400}]}"#, tiny)) == [2])
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "less_than": 1e-999}]}"#, tiny)) == [1, 3])
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "greater_than": -1e-500}]}"#, tiny)) == [1, 2])
        // Values sharing their leading digits.
        let close = [#"{"id":1,"v":1.2}"#, #"{"id":2,"v":1.25}"#, #"{"id":3,"v":12}"#, #"{"id":4,"v":0.12e1}"#]
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "equals": 1.2}]}"#, close)) == [1, 4])
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "greater_than": 1.2}]}"#, close)) == [2, 3])
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/v", "less_than": 1.25}]}"#, close)) == [1, 4])
    }

    @Test func everyCondition_mustHold() async throws {
        let page = try await filtered(#"""
        {"where": [{"pointer": "/n", "equals": 10}, {"pointer": "/tags", "contains": "swift"}]}
        """#)
        #expect(ids(page) == [1])
        #expect(page.metadata["filter.dropped"] == "4")
    }

    @Test func pointers_reachNestedValues_arrayIndexes_andEscapedTokens() async throws {
        let nested = [
            #"{"id":1,"a/b":{"m~n":[{"k":1},{"k":2}]},"":{"":3},"list":["x","y"]}"#,
            #"{"id":2,"a/b":{"m~n":[{"k":2},{"k":1}]},"list":{"1":"y","01":"z"}}"#,
            #"{"id":3,"a\/b":{"m\u007en":[0,{"k":2}]},"list":["y"]}"#,
        ]
        func keptIDs(_ condition: String) async throws -> [Int] {
            ids(try await filtered(#"{"where": [\#(condition)]}"#, nested))
        }
        #expect(try await keptIDs(#"{"pointer": "/a~1b/m~0n/1/k", "equals": 2}"#) == [1, 3], "3's keys are escaped in the item")
        #expect(try await keptIDs(#"{"pointer": "/list/1", "equals": "y"}"#) == [1, 2], "an index in an array, a key in an object")
        #expect(try await keptIDs(#"{"pointer": "/list/01", "equals": "z"}"#) == [2], "01 is no array index")
        #expect(try await keptIDs(#"{"pointer": "/list/-", "not_equals": null}"#) == [1, 2, 3], "- names no element")
        #expect(try await keptIDs(#"{"pointer": "//", "equals": 3}"#) == [1], "empty keys")
        #expect(try await keptIDs(#"{"pointer": "", "contains": "y"}"#) == [], "the whole item is an object")
        #expect(try await keptIDs(#"{"pointer": "/id/x", "equals": 1}"#) == [], "a number has no members")
        // Keys written with escapes from their first byte, and keys that only start alike.
        let escapedKeys = [#"{"\u0069d":1,"\"":2}"#, #"{"identity":2,"id":2,"\\\"":3}"#]
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/id", "less_than": 3}]}"#, escapedKeys)) == [1, 2])
        #expect(ids(try await filtered(#"{"where": [{"pointer": "/\"", "equals": 2}]}"#, escapedKeys)) == [1])
    }

    // MARK: - Mode, projection, metadata

    @Test func dropMode_dropsTheMatchingItems_andCountsThem() async throws {
        let page = try await filtered(#"{"where": [{"pointer": "/n", "equals": 10}], "mode": "drop"}"#)
        #expect(ids(page) == [4, 5])
        #expect(page.metadata["filter.dropped"] == "3")
    }

    @Test func keptItems_keepTheirBytesOrderAndKeys() async throws {
        let lines = (0..<30).map { #"{"id":\#($0), "even": \#($0 % 2 == 0)}"# }
        let pipeline = try pipeline(lines, interceptors: [#"{"plugin": "filter", "config": {"where": [{"pointer": "/even", "equals": true}]}}"#], pageSize: 10)
        let page = try await pipeline.pager.load(pipeline.pager.request(.append, key: "10", params: pipeline.requestParams))
        #expect(page.values.texts == [10, 12, 14, 16, 18].map { #"{"id":\#($0), "even": true}"# })
        #expect(page.metadata["filter.dropped"] == "5")
        #expect(page.nextKey == "20" && page.prevKey == "0", "the source's keys")
        // The first item dropped comes after kept ones: those are kept too, in order.
        let late = try await filtered(#"{"where": [{"pointer": "/id", "less_than": 4}]}"#)
        #expect(ids(late) == [1, 2, 3])
    }

    @Test func aPageLosingNothing_goesOnUnchanged_withoutMetadata_andOneLosingAll_isEmpty() async throws {
        let all = try await filtered(#"{"where": [{"pointer": "/id", "greater_than": 0}]}"#)
        #expect(all.values.texts == Self.items)
        #expect(all.metadata.isEmpty)
        let none = try await filtered(#"{"where": [{"pointer": "/id", "greater_than": 5}]}"#)
        #expect(none.values.isEmpty)
        #expect(none.metadata["filter.dropped"] == "5")
        #expect(try await filtered("{}").values.texts == Self.items)
    }

    @Test func projection_copiesTheValuesByteForByte_underTheirNames() async throws {
        let item = #"  {"id" : 7, "owner": {"login": "m\u00e9", "x": [1, 2 ]}, "score": 1.50E+2, "s": "a\"b"}  "#
        let page = try await filtered(#"""
        {"fields": ["/id", "/owner/login", {"xs": "/owner/x", "quoted \"name\"": "/s"}, "/score", "/missing"]}
        """#, [item, #"{"other":1}"#])
        #expect(page.values.texts == [
            #"{"id":7,"login":"m\u00e9","xs":[1, 2 ],"quoted \"name\"":"a\"b","score":1.50E+2}"#,
            "{}",
        ])
        #expect(page.metadata["filter.dropped"] == "0")
        // The projection is valid JSON, of the same values.
        let decoded = try JSONSerialization.jsonObject(with: Data(page.values[0].bytes)) as? [String: Any]
        #expect(decoded?["login"] as? String == "mé")
        #expect(decoded?["quoted \"name\""] as? String == "a\"b")
    }

    @Test func projection_appliesToKeptItemsOnly_namedByTheLastToken() async throws {
        let page = try await filtered(#"""
        {"where": [{"pointer": "/tags", "contains": "swift"}], "fields": ["/id", "/tags/0", "/a~1b"]}
        """#, Self.items + [#"{"id":6,"tags":["swift"],"a/b":true}"#])
        #expect(page.values.texts == [#"{"id":1,"0":"swift"}"#, #"{"id":4}"#, #"{"id":6,"0":"swift","a/b":true}"#])
        #expect(page.metadata["filter.dropped"] == "3")
    }

    /// Where an object repeats a key, its last member counts, for conditions and fields alike,
    /// as JSON parsers and the http source read it (the first counted: a filter kept an item
    /// the user's own tools read as failing its condition; found by a probe); an item that is
    /// not an object has only the fields of pointers into arrays, or the whole.
    @Test func repeatedKeys_countTheLast_andItemsThatAreNotObjects_projectWhatTheyHave() async throws {
        let items = [#"{"a":9,"b":{"x":1},"a":[1,2]}"#, #"[{"b":2}]"#, #""text""#, #"{"b":{"x":1},"b":{"x":2,"y":3}}"#]
        let page = try await filtered(#"{"fields": ["/a/0", "/b/x", {"whole": ""}, {"first": "/0/b"}]}"#, items)
        #expect(page.values.texts == [
            #"{"0":1,"x":1,"whole":{"a":9,"b":{"x":1},"a":[1,2]}}"#,
            #"{"whole":[{"b":2}],"first":2}"#,
            #"{"whole":"text"}"#,
            #"{"x":2,"whole":{"b":{"x":1},"b":{"x":2,"y":3}}}"#,
        ])
        let repeated = try await filtered(#"{"where": [{"pointer": "/a", "equals": 9}]}"#, items)
        #expect(repeated.values.isEmpty, "the last a is [1,2]")
        let nested = try await filtered(#"{"where": [{"pointer": "/b/x", "equals": 2}]}"#, items)
        #expect(nested.values.texts == [#"{"b":{"x":1},"b":{"x":2,"y":3}}"#])
    }

    /// Through the built `pager`, as a user runs it: only the projections are printed.
    @Test func pagerRun_printsTheFilteredProjections() async throws {
        let pipeline = try pipeline(Self.items, interceptors: [#"""
            {"plugin": "filter", "config": {"where": [{"pointer": "/ok", "equals": true}], "fields": [{"who": "/name"}]}}
            """#])
        let result = try await run(pagerCommand, ["run", pipeline.manifest.file, "--refresh"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout == #"{"who":"café"}"# + "\n")
        #expect(!result.stderr.contains("metadata"), "\(result.stderr)")
        // --verbose shows what the filter attached to the page (it was not shown at all).
        let verbose = try await run(pagerCommand, ["run", pipeline.manifest.file, "--refresh", "-v"])
        #expect(verbose.stderr.contains("refresh: +1 item, 1 in all\n  page metadata: filter.dropped=4\n"), "\(verbose.stderr)")
    }

    /// A store placed before the filter keeps the filtered pages, shorter than the page size:
    /// each names its next page, so the store answers it the next time (it answered only the
    /// last page, and went to the source for every other, run after run).
    @Test func aStoreBeforeTheFilter_answersTheFilteredPages() async throws {
        let lines = (0..<45).map { #"{"id":\#($0),"keep":\#($0 % 2 == 0)}"# }
        let pipeline = try pipeline(lines, interceptors: [
            #"{"plugin": "sqlite-store", "config": {"path": "pages.db"}}"#,
            #"{"plugin": "filter", "config": {"where": [{"pointer": "/keep", "equals": true}]}}"#], pageSize: 10)
        func counters() async throws -> [String: Int] {
            let result = try await run(pagerCommand, ["run", pipeline.manifest.file, "--append", "5", "--stats"])
            #expect(result.code == 0 && result.stdout.split(separator: "\n").count == 23, "\(result.stderr)")
            return Dictionary(uniqueKeysWithValues: result.stderr.matches(of: /counter (\w+) = (\d+)/).map { (String($0.1), Int($0.2)!) })
        }
        #expect(try await counters() == ["misses": 5])
        #expect(try await counters() == ["hits": 5])
    }

    /// A store or cache before the filter, with a source whose next key comes from its key
    /// chain (the C csv example, rows 14–30 dropped): the filtered pages it answers with keep
    /// the mark of a page a filter made short (PAGING_PAGE_SHORTENED), so a later walk reads
    /// them as the first did. Without it, a filtered page read back was a short last page and
    /// the empty one after it the end: the second walk gave 13 of the 43 items, and exit 0.
    @Test(arguments: Self.stores)
    func aStoreBeforeTheFilter_withAKeyChainSource_givesEveryItem_walkAfterWalk(_ store: String) async throws {
        let folder = scratchFolder()
        let csv = try await compileCPlugin("\(repositoryRoot)/Examples/CSource/csv_source.c", name: "csv")
        let rows = (1...60).map { "\($0),\($0 <= 13 || $0 > 30 ? "y" : "n")" }
        try (["id,keep"] + rows).joined(separator: "\n").appending("\n").write(toFile: folder + "/d.csv", atomically: true, encoding: .utf8)
        // 7 fetches for the first walk (the last page is loaded again once, as short last
        // pages are); the second is the store's but for that last page.
        try await walkTwice(folder, store: store, source: #"{"plugin": "\#(csv)", "config": {"path": "d.csv", "page_size": 10}}"#,
                            filter: #"{"where": [{"pointer": "/keep", "equals": "y"}]}"#, field: "id",
                            expected: (1...13).map(String.init) + (31...60).map(String.init), secondRunHits: 6, cacheCalls: 9)
    }

    /// The same with a source whose server caps its pages below the page size without saying
    /// so (40 items, 4 a page), three of whose pages the filter empties: the store keeps each
    /// emptied page with its mark (PAGING_PAGE_EMPTIED), and a later walk goes past it. Without
    /// it, the emptied page read back after a short page was the end: the second walk gave 8
    /// of the 28 items, and exit 0. The second run's 10 pages come from the store (a store that
    /// refused the flag as unknown would miss them).
    @Test(arguments: Self.stores)
    func aStoreBeforeTheFilter_withASourceCappingItsPages_givesEveryItem_walkAfterWalk(_ store: String) async throws {
        let source = #"{"plugin": "\#(try await fixturePlugin("interceptor_work"))", "id": "offsets", "config": {"count": 40, "cap": 4}}"#
        try await walkTwice(scratchFolder(), store: store, source: source,
                            filter: #"{"mode": "drop", "where": [{"pointer": "/n", "greater_or_equal": 8}, {"pointer": "/n", "less_than": 20}]}"#,
                            field: "n", expected: (Array(0..<8) + Array(20..<40)).map(String.init), secondRunHits: 10)
    }

    static let stores = ["sqlite-store", "sqlite-store, isolated", "redis-cache", "postgres-store", "cache"]

    /// The manifest entry of `store` (one of ``stores``), its server started if it needs one,
    /// and what stops that server.
    static func entry(of store: String) async throws -> (entry: String, stop: () -> Void) {
        switch store {
        case "redis-cache":
            let redis = try await RedisServer.start()
            return (#"{"plugin": "redis-cache", "config": {"address": "\#(redis.address)"}}"#, redis.stop)
        case "postgres-store":
            let postgres = try await PostgresServer.start()
            return (#"{"plugin": "postgres-store", "config": {"conninfo": "\#(postgres.conninfo)"}}"#, postgres.stop)
        case "cache":
            return (#"{"plugin": "cache"}"#, {})
        default:
            return (#"{"plugin": "sqlite-store", "config": {"path": "pages.db"}\#(store.hasSuffix("isolated") ? #", "isolation": "process""# : "")}"#, {})
        }
    }

    /// A store before the filter kept the empty page where the data ended (after a page the
    /// filter made short); once the data grew, a later run asks the source for that page
    /// rather than end there (it printed the first run's items again, exit 0).
    @Test(arguments: ["sqlite-store", "redis-cache", "postgres-store"])
    func aStoreBeforeTheFilter_asksTheSourceForTheEmptyPageItKept_afterTheDataGrew(_ store: String) async throws {
        let (storeEntry, stop) = try await Self.entry(of: store)
        defer { stop() }
        let folder = scratchFolder(), plugin = try await fixturePlugin("interceptor_work")
        let filter = #"{"plugin": "filter", "config": {"mode": "drop", "where": [{"pointer": "/n", "greater_or_equal": 20}, {"pointer": "/n", "less_than": 25}]}}"#
        for count in [30, 38] {
            // The key chain names pages past the data (to 45), as an offset API's does.
            try """
            {"source": {"plugin": "\(plugin)", "id": "offsets", "config": {"count": \(count), "count_after": 45, "change_at": 100000}},
             "interceptors": [\(storeEntry), \(filter)], "page_size": 10}
            """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
            let result = try await run(pagerCommand, ["run", folder + "/m.json", "--refresh", "--append", "10"])
            #expect(result.code == 0, "\(result.stderr)")
            let numbers = result.stdout.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Int])?["n"] }
            #expect(numbers == Array(0..<20) + Array(25..<count), "\(count) items: \(result.stderr)")
        }
    }

    /// Walks `source` to its end twice, through `store` (one of ``stores``) and then the filter
    /// of `filter`'s config, and expects the items' `field`s to be `expected` each time: two
    /// `pager run`s (the second with `secondRunHits` store hits, when given), or two walks of
    /// one pipeline for the cache, which keeps pages for the life of its instance (with at most
    /// `cacheCalls` calls of the source, when given).
    func walkTwice(_ folder: String, store: String, source: String, filter: String, field: String, expected: [String],
                   secondRunHits: Int? = nil, cacheCalls: Int? = nil) async throws {
        let (storeEntry, stop) = try await Self.entry(of: store)
        defer { stop() }
        try """
        {"source": \(source), "interceptors": [\(storeEntry), {"plugin": "filter", "config": \(filter)}], "page_size": 10}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        func fields(_ values: [String]) -> [String] {
            values.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?[field].map { "\($0)" } }
        }
        if store == "cache" {
            let pipeline = try Pipeline(manifest: try Manifest.load(path: folder + "/m.json"),
                                        searchPath: PluginSearchPath(folders: [productsFolder]), sink: log.sink, recordsStats: true)
            let manager = PaginationManager(pager: pipeline.pager, configuration: .init(pageSize: 10))
            for walk in 1...2 {
                await manager.refresh().value
                while !manager.output.appendState.isEndReached, manager.output.appendState.error == nil {
                    await manager.append().value
                }
                #expect(fields(manager.output.values.map(\.text)) == expected, "walk \(walk)")
            }
            if let cacheCalls { #expect(try #require(pipeline.members.first).stats().calls <= cacheCalls) }
            return
        }
        for runNumber in 1...2 {
            let result = try await run(pagerCommand, ["run", folder + "/m.json", "--refresh", "--append", "40", "--stats"])
            #expect(result.code == 0, "\(result.stderr)")
            #expect(fields(result.stdout.split(separator: "\n").map(String.init)) == expected, "run \(runNumber): \(result.stderr)")
            if runNumber == 2, let secondRunHits { #expect(result.stderr.contains("counter hits = \(secondRunHits)"), "\(result.stderr)") }
        }
    }

    @Test func twoFilters_countEveryDroppedItem() async throws {
        let pipeline = try pipeline(Self.items, interceptors: [
            #"{"plugin": "filter", "config": {"where": [{"pointer": "/id", "not_equals": 1}]}}"#,
            #"{"plugin": "filter", "config": {"where": [{"pointer": "/id", "less_than": 4}]}}"#,
        ])
        let page = try await pipeline.pager.load(pipeline.pager.refreshRequest(params: pipeline.requestParams))
        #expect(ids(page) == [2, 3])
        #expect(page.metadata["filter.dropped"] == "3", "1 by the first filter it meets, 2 by the other")
    }

    /// One instance serves concurrent loads (the plugin is THREAD_SAFE): each page is its own.
    @Test func concurrentLoads_throughOneInstance_eachGetTheirOwnPage() async throws {
        let lines = (0..<400).map { #"{"id":\#($0),"keep":\#($0 % 3 == 0)}"# }
        let pipeline = try pipeline(lines, interceptors: [
            #"{"plugin": "filter", "config": {"where": [{"pointer": "/keep", "equals": true}], "fields": ["/id"]}}"#], pageSize: 10)
        let pages = try await withThrowingTaskGroup(of: (Int, [String]).self) { group in
            for start in stride(from: 0, to: 400, by: 10) {
                group.addTask {
                    let page = try await pipeline.pager.load(pipeline.pager.request(.append, key: PluginKey("\(start)"), params: pipeline.requestParams))
                    return (start, page.values.texts)
                }
            }
            return try await group.reduce(into: [Int: [String]]()) { $0[$1.0] = $1.1 }
        }
        for (start, texts) in pages {
            #expect(texts == (start..<start + 10).filter { $0 % 3 == 0 }.map { #"{"id":\#($0)}"# })
        }
        #expect(pages.count == 40)
    }

    // MARK: - Config

    static let invalidConfigs: [(config: String, message: String)] = [
        (#"{"where": [{"pointer": "/a", "equals": 1}, {"pointer": "/b"}]}"#,
         "where[1]: expected exactly one of equals, not_equals, contains, less_than, less_or_equal, greater_than, greater_or_equal; got none"),
        (#"{"where": [{"pointer": "/a", "equals": 1, "contains": "x"}]}"#, "where[0]: expected exactly one of equals, not_equals, contains, less_than, less_or_equal, greater_than, greater_or_equal; got equals and contains"),
        (#"{"where": [{"equals": 1}]}"#, #"where[0]: "pointer" is required"#),
        (#"{"where": [{"pointer": "owner/login", "equals": 1}]}"#, #"where[0].pointer: "owner/login" is not a JSON pointer: it must be empty or start with "/""#),
        (#"{"where": [{"pointer": "/a~2", "equals": 1}]}"#, #"where[0].pointer: "/a~2" is not a JSON pointer: "~" must be followed by 0 or 1"#),
        (#"{"where": [{"pointer": "/a~", "equals": 1}]}"#, #"where[0].pointer: "/a~" is not a JSON pointer"#),
        (#"{"where": [{"pointer": 3, "equals": 1}]}"#, "where[0].pointer: expected a JSON pointer string such as \"/owner/login\", got a number"),
        (#"{"where": [{"pointer": "/a", "less_than": "3"}]}"#, "where[0].less_than: expected a number, got a string"),
        (#"{"where": [{"pointer": "/a", "greater_or_equal": null}]}"#, "where[0].greater_or_equal: expected a number, got null"),
        (#"{"where": [{"pointer": "/a", "equals": [1]}]}"#, "where[0].equals: expected a string, number, true, false or null, got an array"),
        (#"{"where": [{"pointer": "/a", "contains": {}}]}"#, "where[0].contains: expected a string, number, true, false or null, got an object"),
        (#"{"where": [{"pointer": "/a", "equals": 1, "case": "fold"}]}"#, #"where[0]: unknown key "case"; expected "pointer" and one of equals"#),
        (#"{"where": {"pointer": "/a", "equals": 1}}"#, "where: expected an array of conditions, got an object"),
        (#"{"where": ["/a"]}"#, "where[0]: expected an object"),
        (#"{"mode": "keeep"}"#, #"mode: expected "keep" or "drop", got "keeep""#),
        (#"{"mode": true}"#, #"mode: expected "keep" or "drop", got true"#),
        (#"{"mode": "drop"}"#, #"mode: "drop" needs at least one condition in where"#),
        (#"{"fields": "/a"}"#, "fields: expected an array of JSON pointers"),
        (#"{"fields": []}"#, "fields: expected at least one field"),
        (#"{"fields": [""]}"#, #"fields[0]: the pointer "" names the whole item, which has no name"#),
        (#"{"fields": ["/a", "/b/a"]}"#, #"fields[1]: the field name "a" is given twice"#),
        (#"{"fields": ["/a", {"b": "/b", "a": "/c"}]}"#, #"fields[1].a: the field name "a" is given twice"#),
        (#"{"fields": [{"b": "b"}]}"#, #"fields[0].b: "b" is not a JSON pointer"#),
        (#"{"fields": [{"b": "/b"}, {}]}"#, #"fields[1]: expected at least one "name": "/pointer" member"#),
        (#"{"fields": [1]}"#, "fields[0]: expected a JSON pointer string or an object {\"name\": \"/pointer\"}, got a number"),
        (#"{"where": [], "filds": ["/a"]}"#, "filds: unknown key; expected where, mode or fields"),
    ]

    @Test(arguments: invalidConfigs)
    func invalidConfig_isRefusedAtCreate_namingTheKey(_ config: String, _ message: String) async throws {
        let library = try PluginLibrary.open(path: shippedPlugin("filter"))
        let value = try JSONValue.parse(config)
        do {
            _ = try library.makeInterceptor(config: value, sink: log.sink)
            Issue.record("\(config) was accepted")
        } catch {
            guard case .createFailed(_, let id, let status, let reported) = error else {
                Issue.record("\(config): \(error)")
                return
            }
            #expect(id == "filter" && status == .invalidConfig)
            #expect(reported.hasPrefix(message), "\(config): \(reported)")
        }
    }

    /// A manifest with a bad filter config names the file, the plugin and the key path.
    @Test func invalidConfig_inAManifest_namesTheManifestAndTheKey() async throws {
        do {
            _ = try pipeline(Self.items, interceptors: [#"{"plugin": "filter", "config": {"where": [{"pointer": "/n"}]}}"#])
            Issue.record("the manifest loaded")
        } catch {
            let text = "\(error)"
            #expect(text.contains("m.json: $.interceptors[0] (plugin \"filter\"): "), "\(text)")
            #expect(text.contains("where[0]: expected exactly one of equals"), "\(text)")
        }
    }

    // MARK: - The plugin guide

    /// docs/PLUGIN-GUIDE.md quotes the filter as its example of a transform: the quotes must be
    /// the code that ships (transform() whole; each other line a line of filter.c, notes aside).
    @Test func pluginGuide_quotesTheFiltersCode_asItIs() throws {
        let source = try String(contentsOfFile: "\(repositoryRoot)/Plugins/Filter/filter.c", encoding: .utf8)
        let guide = try String(contentsOfFile: "\(repositoryRoot)/docs/PLUGIN-GUIDE.md", encoding: .utf8)
        let section = try #require(guide.components(separatedBy: "\n## A page transform in C").dropFirst().first)
            .components(separatedBy: "\n## ")[0]
        let blocks = section.components(separatedBy: "```c\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        #expect(blocks.count == 3)
        let start = try #require(source.range(of: "static uint32_t filt_transform("))
        let end = try #require(source.range(of: "\n}\n", range: start.upperBound..<source.endIndex))
        #expect(blocks.last == String(source[start.lowerBound..<end.upperBound]))
        let sourceLines = Set(source.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        let quoted = blocks.dropLast().joined().split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let missing = quoted.filter { !$0.isEmpty && !$0.hasPrefix("/*") && !sourceLines.contains($0) }
        #expect(missing.isEmpty, "the guide quotes lines filter.c does not have: \(missing)")
    }

    // MARK: - pager check

    @Test func pagerCheck_passes_withAConfig() async throws {
        let config = #"{"where": [{"pointer": "/n", "greater_or_equal": 10}], "fields": ["/n", {"label": "/name"}]}"#
        let result = try await run(pagerCommand, ["check", shippedPlugin("filter"), "--config", config,
                                                  "--cycles", "100", "--timeout-ms", "500"])
        #expect(result.code == 0, "\(result.stdout)\(result.stderr)")
        let last = result.stdout.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.contains(" passed, 0 failed"), "\(result.stdout)")
        #expect(result.stdout.contains("paging.page-transform/1, which this host offers"), "\(result.stdout)")
    }
}
