import Foundation
import Paging
import PagingHost
import Testing

/// A host that does not offer an extension, as a host older than it would not
/// (``PluginLimits/withheldExtensions``), through real dlopen: the plugin's `get_extension`
/// answers NULL, a plugin that requires the extension is refused, and the shipped plugins' paths
/// for older hosts serve the same pages.
@Suite("A host without an extension, as an older host")
struct WithheldExtensionsTests {
    let log = LogRecorder()

    func withholding(_ ids: String...) -> PluginLimits { PluginLimits(withheldExtensions: Set(ids)) }

    func load(_ source: LoadedSource, key: String, pageSize: Int) async throws -> [String] {
        try await Pager(source: source).load(
            PagingRequest(kind: .refresh, keyChain: PagingKeyChain(key: PluginKey(key)), params: PagingRequestParams(pageSize: pageSize))
        ).values.map(\.text)
    }

    /// The listener fixture publishes a counter when the host offers `paging.metrics/1`.
    @Test func aWithheldExtension_isAnsweredNULL_andTheOthersStillAreNot() async throws {
        let library = try PluginLibrary.open(path: try await fixturePlugin("interceptor_work"))
        let offered = try library.makeInterceptor(id: "listener", sink: log.sink)
        let withheld = try library.makeInterceptor(id: "listener", sink: log.sink, limits: withholding("paging.metrics/1"))
        for listener in [offered, withheld] {
            let source = try library.makeSource(id: "offsets", sink: log.sink)
            let pager = Pager(source: source, interceptors: [listener])
            let page = try await pager.load(pager.request(.refresh, key: "0", params: PagingRequestParams(pageSize: 3)))
            #expect(page.values.map(\.text) == [#"{"n":0}"#, #"{"n":1}"#, #"{"n":2}"#])
        }
        #expect(offered.stats.counters == ["proceeded": 1])
        #expect(withheld.stats.counters.isEmpty)
    }

    @Test(arguments: [("batch_items", nil, PluginKind.source, "batch-items", "paging.fetch-items/1"),
                      ("interceptor_work", "transformer", .interceptor, "transformer", "paging.page-transform/1")])
    func aPluginThatRequiresIt_isRefusedAtCreation_namingIt(
        fixture: String, id: String?, kind: PluginKind, name: String, needed: String
    ) async throws {
        let library = try PluginLibrary.open(path: try await fixturePlugin(fixture))
        let expected = "plugin '\(name)' (built for plugin ABI \(PluginABIVersion.host)) needs extension '\(needed)', which this host (ABI \(PluginABIVersion.host)) does not offer"
        #expect(throws: PluginLoadError.self) { _ = try library.descriptor(id: id, kind: kind, withholding: [needed]) }
        do {
            switch kind {
            case .source: _ = try library.makeSource(id: id, sink: log.sink, limits: withholding(needed))
            case .interceptor: _ = try library.makeInterceptor(id: id, sink: log.sink, limits: withholding(needed))
            }
            Issue.record("created without \(needed)")
        } catch {
            #expect("\(error)".hasSuffix(expected), "\(error)")
        }
        // Offered, it loads.
        #expect(try library.descriptor(id: id, kind: kind).id == name)
    }

    /// Found by a probe: a Swift plugin's descriptor required nothing, so a host without the
    /// extension its protocol needs loaded it. `redact` (a TransformingPlugin) then passed every
    /// page through unredacted, and `delay` (a DeferringInterceptorPlugin) failed every load.
    /// PagingPluginKit requires them for it; a plugin's `requiredExtensions` says otherwise.
    @Test(arguments: [("redact", "paging.page-transform/1"), ("delay", "paging.async-intercept/1")])
    func aSwiftPlugin_requiresTheExtensionItsProtocolNeeds(_ id: String, _ needed: String) async throws {
        let library = try PluginLibrary.open(path: "\(productsFolder)/libexample-plugins.so")
        #expect(try library.descriptor(id: id, kind: .interceptor).requiredExtensions == [needed])
        #expect(throws: PluginLoadError.self) { _ = try library.descriptor(id: id, kind: .interceptor, withholding: [needed]) }
        #expect(try library.descriptor(id: "numbers", kind: .source).requiredExtensions.isEmpty)
    }

    /// jsonlines hands over a page's lines in runs of up to 256 with `paging.fetch-items/1`, and
    /// one `fetch_add_item` a line without it: the same pages either way, lines with escapes and
    /// non-ASCII text among them.
    @Test func jsonlines_withoutFetchItems_addsItsLinesOneByOne_toTheSamePages() async throws {
        let file = scratchFolder() + "/lines.jsonl"
        let lines = (0..<700).map { n in n % 97 == 5 ? #"{"n":\#(n),"s":"caf\#u{e9} \"q\" \\n"}"# : #"{"n":\#(n)}"# }
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let library = try PluginLibrary.open(path: shippedPlugin("jsonlines"))
        let config = JSONValue.object([("path", .string(file))])
        let batched = try library.makeSource(config: config, sink: log.sink)
        let oneByOne = try library.makeSource(config: config, sink: log.sink, limits: withholding("paging.fetch-items/1"))
        for (key, size) in [("0", 300), ("300", 300), ("600", 300), ("17", 1)] {
            let expected = Array(lines.dropFirst(Int(key)!).prefix(size))
            #expect(try await load(batched, key: key, pageSize: size) == expected)
            #expect(try await load(oneByOne, key: key, pageSize: size) == expected)
        }
    }
}
