import CPaging
import Dispatch
import FoundationEssentials
import Dispatch
import Paging
import PagingHost
import Synchronization

// The checks of how a plugin keeps the finished ABI 1.0: struct sizes and extensions
// (abi-growth, extensions), call handles (call-handles) and items (items-valid).

/// The sizes of the plugin-owned structs in ABI 1.0, and in the 1.0 draft (before struct_size
/// existed: the offset of each struct's first 1.0 member).
enum ABISizes {
    static let entry = MemoryLayout<paging_plugin_entry_t>.size
    static let descriptor = MemoryLayout<paging_plugin_descriptor_t>.size
    static let source = MemoryLayout<paging_source_t>.size
    static let interceptor = MemoryLayout<paging_interceptor_t>.size
    static let draftEntry = MemoryLayout<paging_plugin_entry_t>.offset(of: \.`init`)!
    static let draftDescriptor = MemoryLayout<paging_plugin_descriptor_t>.offset(of: \.required_extensions)!

    /// A struct_size no ABI 1.0 library writes, and the loader refuses: not 0 (the draft), and
    /// smaller than the draft's struct.
    static func isTooSmall(_ size: UInt32, draft: Int) -> Bool { size != 0 && Int(size) < draft }
}

extension Conformance {
    /// An extension id no one offers, for get_extension to answer NULL.
    static let unknownExtension = "paging.no-such-extension/1"

    /// The instance extensions of ABI 1.0 (extensions.h).
    static let instanceExtensions = [
        PAGING_EXT_HEALTH, PAGING_EXT_PAGE_TRANSFORM, PAGING_EXT_ASYNC_INTERCEPT, PAGING_EXT_LOAD_OUTCOME,
        PAGING_EXT_SIZED_KEY_CHAIN, PAGING_EXT_INVALIDATION,
    ]

    /// The host's failure of a page holding an item that is not one JSON value in valid UTF-8,
    /// from "item N is not valid JSON: ..." on; `nil` for any other error.
    static func invalidItem(_ error: any Error) -> String? {
        let text = (error as? PluginError)?.message ?? "\(error)"
        guard let range = text.firstRange(of: #/item [0-9]+ is not valid JSON: /#) else { return nil }
        return String(text[range.lowerBound...])
    }

    /// A line the host logs when it refuses a call handle used outside its call or thread.
    static func isRefusedHandle(_ line: String) -> Bool {
        line.hasSuffix("; refused") && line.contains("handle")
    }

    /// "PAGING_OK", "PAGING_ERR_TRANSIENT"...; `nil` for a code ABI 1.0 does not define.
    static func statusName(_ code: UInt32) -> String? {
        let names: [UInt32: String] = [
            PAGING_OK: "PAGING_OK", PAGING_ERR_CANCELLED: "PAGING_ERR_CANCELLED", PAGING_ERR_TRANSIENT: "PAGING_ERR_TRANSIENT",
            PAGING_ERR_TIMEOUT: "PAGING_ERR_TIMEOUT", PAGING_ERR_INVALID_CONFIG: "PAGING_ERR_INVALID_CONFIG",
            PAGING_ERR_INVALID_REQUEST: "PAGING_ERR_INVALID_REQUEST", PAGING_ERR_NOT_FOUND: "PAGING_ERR_NOT_FOUND",
            PAGING_ERR_INTERNAL: "PAGING_ERR_INTERNAL", PAGING_ERR_INVALID_ARGUMENT: "PAGING_ERR_INVALID_ARGUMENT",
            PAGING_ERR_UNSUPPORTED: "PAGING_ERR_UNSUPPORTED",
        ]
        return names[code]
    }

    /// `body`'s result, or `nil` when it has not returned within `timeout`. It runs on a thread
    /// of its own, which goes on (holding what `body` holds) when it does not return.
    static func bounded<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () -> T) async -> T? {
        await withCheckedContinuation { continuation in
            let once = ResumeFirst(continuation)
            detachThread(named: "paging-check") { once.resume(body()) }
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(timeout.milliseconds))) { once.resume(nil) }
        }
    }

    /// `body`'s result, or `nil` when it has not returned within `timeout`; an asynchronous
    /// `body` runs in a task of its own, which goes on when it does not return.
    static func bounded<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async -> T) async -> T? {
        await withCheckedContinuation { continuation in
            let once = ResumeFirst(continuation)
            Task { once.resume(await body()) }
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(timeout.milliseconds))) { once.resume(nil) }
        }
    }
}

/// Resumes a continuation with the first value it is given.
private final class ResumeFirst<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T?, Never>?>

    init(_ continuation: CheckedContinuation<T?, Never>) {
        self.continuation = Mutex(continuation)
    }

    func resume(_ value: T?) {
        continuation.withLock { continuation in
            defer { continuation = nil }
            return continuation
        }?.resume(returning: value)
    }
}

extension Instance {
    /// The instance's `paging.health/1` answer.
    func health() -> PluginHealth {
        switch self {
        case .source(let source): source.health()
        case .interceptor(let interceptor): interceptor.health()
        }
    }
}

/// What an instance table says about itself, read as the plugin filled it.
struct TableFacts {
    var name: String
    var create: String
    var fullSize: Int
    /// `nil` for a library built against the draft headers, whose table has no struct_size.
    var structSize: UInt32?
    var hasGetExtension = false
    /// The ids get_extension answered with a table although the instance cannot offer them.
    var unknownAnswered: [String] = []
    /// The instance extensions it offers.
    var offered: [String] = []

    init(name: String, create: String, fullSize: Int) {
        self.name = name
        self.create = create
        self.fullSize = fullSize
    }

    /// Asks get_extension for ids nobody offers (it must answer NULL) and for those of ABI 1.0.
    mutating func probe(_ lookup: (UnsafePointer<CChar>) -> UnsafeRawPointer?) {
        hasGetExtension = true
        unknownAnswered = [Conformance.unknownExtension, ""].filter { id in id.withCString { lookup($0) } != nil }
        offered = Conformance.instanceExtensions.filter { id in id.withCString { lookup($0) } != nil }
    }
}

/// What driving a source through its normal calls met.
struct SourceWalk {
    var keyChains = 0
    var fetches = 0
    var loaded = 0
    var items = 0
    /// The fetches that failed: their number (1-based), key and error.
    var failures: [(page: Int, key: PluginKey, error: any Error)] = []
    /// The walk stopped because no key followed.
    var ended = false
}

/// What driving an interceptor through its normal calls met.
struct InterceptorTraffic {
    var intercepts = 0
    var handles = 0
    /// Requests it answered itself (COMPLETE), with a page the host took or refused.
    var answered = 0
    var answeredItems = 0
    /// The answered requests whose page the host refused over an item.
    var invalid: [(request: PluginRequest, message: String)] = []
    /// Requests it failed (intercept, or transform of the page), the first failure's message.
    var failed = 0
    var firstFailure: String?
    /// Why the driving stopped early: an intercept not answered in time (each would cost the
    /// timeout, and the check process was killed with no word of why).
    var unanswered: String?
}

extension Context {
    var validConfig: JSONValue { Conformance.validConfig(for: descriptor.id, options) }

    // MARK: - abi-growth

    func abiGrowth() -> ConformanceResult {
        // A required extension this host lacks: the loader's one line.
        do {
            _ = try library.descriptor(id: descriptor.id, kind: descriptor.kind, withholding: options.withheldExtensions)
        } catch {
            return fail("the host refuses it: \(error)")
        }
        guard let raw = rawDescriptor() else { return fail("not listed by the library") }
        let entrySize = library.entry.pointee.struct_size, descriptorSize = raw.pointee.struct_size
        var problems: [String] = [], notes: [String] = []
        let host = PluginABIVersion.host
        // Larger than the ABI it was built against defines (the size of a struct that holds the
        // table, say): a later 1.x host would read the bytes after it as the members added since.
        func larger(_ what: String, _ type: String, _ size: some BinaryInteger, _ full: Int, builtAgainst version: PluginABIVersion, fix: String) {
            guard version.major == host.major, version.minor == host.minor, Int(size) > full else { return }
            problems.append("\(what) says struct_size \(size), larger than sizeof(\(type)) in ABI \(version), the ABI it was built against "
                            + "(\(full) bytes): \(fix) (a later 1.x host would read the bytes after it as members added since)")
        }
        larger("the entry", "paging_plugin_entry_t", entrySize, ABISizes.entry, builtAgainst: library.abiVersion,
               fix: "start its initializer with PAGING_ENTRY_HEAD")
        larger("the descriptor", "paging_plugin_descriptor_t", descriptorSize, ABISizes.descriptor, builtAgainst: descriptor.abiVersion,
               fix: "start its initializer with PAGING_DESCRIPTOR_HEAD")
        if entrySize != 0, Int(entrySize) < ABISizes.entry {
            problems.append("the entry's struct_size is \(entrySize), smaller than ABI 1.0's \(ABISizes.entry) bytes: start its initializer with PAGING_ENTRY_HEAD")
        }
        if descriptorSize != 0, Int(descriptorSize) < ABISizes.descriptor {
            problems.append("the descriptor's struct_size is \(descriptorSize), smaller than ABI 1.0's \(ABISizes.descriptor) bytes: start its initializer with PAGING_DESCRIPTOR_HEAD")
        }
        let draft = entrySize == 0 || descriptorSize == 0
        if draft { notes.append("built against the 1.0 draft headers: rebuild to offer extensions") }
        if let newer = [library.abiVersion, descriptor.abiVersion].first(where: { $0.minor > host.minor }) {
            notes.append("built against ABI \(newer), newer than this host's \(host): it requires no extension this host lacks, and the host reads only the members of \(host.major).\(host.minor)")
        }
        if !descriptor.requiredExtensions.isEmpty {
            notes.append("requires the host extensions \(descriptor.requiredExtensions.joined(separator: ", ")), which this host offers")
        }
        let table: TableFacts
        switch inspectTable(validConfig) {
        case .failure(let error):
            if !problems.isEmpty { return fail(problems.joined(separator: "; "), notes: notes) }
            return skip("cannot be created with a valid config (see create-valid-config), so its table cannot be checked: \(error)")
        case .success(let facts):
            table = facts
        }
        if let size = table.structSize {
            if size == 0 {
                problems.append("the \(table.name) table \(table.create) returns has struct_size 0: set it to sizeof(\(table.name)) (without it the host reads none of the table's 1.0 members, so never asks for extensions)")
            } else if Int(size) < table.fullSize {
                problems.append("the \(table.name) table \(table.create) returns has struct_size \(size), smaller than ABI 1.0's \(table.fullSize) bytes: set it to sizeof(\(table.name))")
            }
            larger("the \(table.name) table \(table.create) returns", table.name, size, table.fullSize, builtAgainst: descriptor.abiVersion,
                   fix: "set it to sizeof(\(table.name)), not the size of a struct that holds it")
        }
        if !table.unknownAnswered.isEmpty {
            let ids = table.unknownAnswered.map { "\"\($0)\"" }.joined(separator: " and ")
            problems.append("get_extension answered a table for \(ids), which it cannot offer: it must answer NULL for every id the instance does not offer")
        }
        if !problems.isEmpty { return fail(problems.joined(separator: "; "), notes: notes) }
        if draft {
            return pass("built against the 1.0 draft headers (struct_size 0): the host reads its structs as the draft defined them", notes: notes)
        }
        var reason = "struct_size: entry \(entrySize), descriptor \(descriptorSize), \(table.name) \(table.structSize ?? 0) (ABI 1.0: \(ABISizes.entry), \(ABISizes.descriptor), \(table.fullSize))"
        if table.hasGetExtension {
            reason += "; get_extension answers NULL for unknown ids"
            if !table.offered.isEmpty { reason += "; offers \(table.offered.joined(separator: ", "))" }
        } else {
            reason += "; no get_extension (no extensions)"
        }
        return pass(reason, notes: notes)
    }

    /// The descriptor of this plugin as the library states it.
    func rawDescriptor() -> UnsafePointer<paging_plugin_descriptor_t>? {
        guard let count = library.entry.pointee.plugin_count, let describe = library.entry.pointee.descriptor else { return nil }
        for index in 0..<min(count(), 1_000) {
            if let raw = describe(index), raw.pointee.id.map({ String(cString: $0) }) == descriptor.id { return raw }
        }
        return nil
    }

    /// Creates an instance with `config` and reads its table as the plugin filled it: its
    /// struct_size, and what get_extension answers. Destroys it afterwards.
    func inspectTable(_ config: JSONValue) -> Result<TableFacts, PluginLoadError> {
        let instance = PluginInstance(label: "\(descriptor.id) (\(library.path))", sink: ConformanceLog.discard, limits: limits)
        defer { instance.destroyed.store(true, ordering: .releasing) }
        do {
            switch descriptor.kind {
            case .source:
                guard let create = library.entry.pointee.create_source else {
                    throw PluginLoadError.invalidEntry(path: library.path, reason: "plugin '\(descriptor.id)' is a source but create_source is NULL")
                }
                let plugin = try library.create(descriptor, config, instance) { create($0, instance.table, $1) }
                defer { plugin.pointee.destroy?(plugin) }
                var facts = TableFacts(name: "paging_source_t", create: "create_source", fullSize: ABISizes.source)
                // A draft library's table ends before struct_size: nothing more to read.
                guard !descriptor.isDraft else { return .success(facts) }
                facts.structSize = plugin.pointee.struct_size
                if let lookup = extensionLookup(plugin, isDraft: false) { facts.probe(lookup) }
                return .success(facts)
            case .interceptor:
                guard let create = library.entry.pointee.create_interceptor else {
                    throw PluginLoadError.invalidEntry(path: library.path, reason: "plugin '\(descriptor.id)' is an interceptor but create_interceptor is NULL")
                }
                let plugin = try library.create(descriptor, config, instance) { create($0, instance.table, $1) }
                defer { plugin.pointee.destroy?(plugin) }
                var facts = TableFacts(name: "paging_interceptor_t", create: "create_interceptor", fullSize: ABISizes.interceptor)
                guard !descriptor.isDraft else { return .success(facts) }
                facts.structSize = plugin.pointee.struct_size
                if let lookup = extensionLookup(plugin, isDraft: false) { facts.probe(lookup) }
                return .success(facts)
            }
        } catch let error as PluginLoadError {
            return .failure(error)
        } catch {
            return .failure(.invalidEntry(path: library.path, reason: "\(error)"))
        }
    }

    // MARK: - extensions

    func extensions() async -> ConformanceResult {
        if descriptor.isDraft { return skip("built against the 1.0 draft headers, which have no extensions") }
        let log = ConformanceLog()
        let instance: Instance
        switch makeValid(sink: log.sink) {
        case .refused(let result): return result
        case .made(let made): instance = made
        }
        let offered: [String], withoutFunction: [String]
        switch instance {
        case .source(let source): (offered, withoutFunction) = (source.offeredExtensions, source.extensionsWithoutFunction)
        case .interceptor(let interceptor): (offered, withoutFunction) = (interceptor.offeredExtensions, interceptor.extensionsWithoutFunction)
        }
        // Taken as not offered, with a warning at each run: the author meant to offer it.
        if !withoutFunction.isEmpty {
            instance.destroy()
            return fail("get_extension answered a table whose function is NULL for \(withoutFunction.joined(separator: ", ")): the host takes it as not offered, and never calls it")
        }
        guard !offered.isEmpty else {
            instance.destroy()
            return skip("offers no instance extension (\(Conformance.instanceExtensions.joined(separator: ", ")))")
        }
        var reports: [String] = []
        var notes: [String] = []
        for id in offered {
            let outcome: ExtensionOutcome
            switch (id, instance) {
            case (PAGING_EXT_HEALTH, _): outcome = await health(instance, log)
            case (PAGING_EXT_PAGE_TRANSFORM, .interceptor(let interceptor)): outcome = await transforms(interceptor)
            case (PAGING_EXT_ASYNC_INTERCEPT, .interceptor(let interceptor)): outcome = await deferredIntercepts(interceptor, log)
            case (PAGING_EXT_LOAD_OUTCOME, .interceptor(let interceptor)): outcome = await loadOutcomes(interceptor)
            case (PAGING_EXT_SIZED_KEY_CHAIN, .source(let source)): outcome = await sizedKeyChains(source, log)
            case (PAGING_EXT_INVALIDATION, .source(let source)): outcome = await refreshKeysAround(source, log)
            default: continue
            }
            switch outcome {
            case .passed(let report, let note):
                reports.append("\(id): \(report)")
                if let note { notes.append("\(id): \(note)") }
            case .failed(let reason):
                // A call that did not return holds the instance, which is left to it.
                return fail("\(id): \(reason)")
            }
        }
        instance.destroy()
        return pass(reports.joined(separator: "; "), notes: notes)
    }

    enum ExtensionOutcome {
        case passed(String, note: String? = nil)
        case failed(String)
    }

    func health(_ instance: Instance, _ log: ConformanceLog) async -> ExtensionOutcome {
        let start = ContinuousClock.now
        let before = log.lines().count
        guard let health = await Conformance.bounded(options.fetchTimeout, { instance.health() }) else {
            return .failed("check() did not return within \(timeoutText)")
        }
        let took = Int(Conformance.milliseconds(since: start))
        switch health {
        case .notOffered, .healthy:
            return .passed("check() answered PAGING_OK in \(took) ms")
        case .unhealthy(let status):
            guard let name = Conformance.statusName(status.rawValue) else {
                return .failed("check() answered \(status.rawValue), which is neither PAGING_OK nor a PAGING_ERR_* code")
            }
            guard let why = log.lines(from: before).last else {
                return .passed("check() answered \(name) in \(took) ms", note: "answered \(name) without saying why through host->log")
            }
            return .passed("check() answered \(name) in \(took) ms: \(clip(why))")
        }
    }

    /// transform() of sample pages (see handle-any-page for odd ones): within the timeout, no
    /// misuse of the builder, an answer the host knows.
    func transforms(_ interceptor: LoadedInterceptor) async -> ExtensionOutcome {
        let pages = [
            PluginPage(request: Self.sampleRequests[0], values: [], prevKey: nil, nextKey: nil),
            PluginPage(request: Self.sampleRequests[2], values: (0..<200).map { PluginItem(json: #"{"n":\#($0),"s":"x"}"#) },
                       prevKey: "0", nextKey: "40"),
        ]
        var sizes: [Int] = []
        for page in pages {
            guard let result = await Conformance.bounded(options.fetchTimeout, { () async -> Result<PluginPage, any Error> in
                do { return .success(try await interceptor.transform(page: page)) } catch { return .failure(error) }
            }) else {
                return .failed("transform() did not return within \(timeoutText)")
            }
            switch result {
            case .success(let transformed): sizes.append(transformed.values.count)
            case .failure(let error as PluginError) where error.status == PluginStatus.invalidArgument || error.message.contains("unknown code"):
                return .failed("transform of \(page.values.count) items: \(error.message)")
            case .failure(let error):
                return .passed("transform() failed a page of \(page.values.count) items: \(clip("\(error)"))", note: "fails some pages")
            }
        }
        return .passed("transformed pages of \(pages.map { "\($0.values.count)" }.joined(separator: " and ")) items into "
                       + "\(sizes.map(String.init).joined(separator: " and "))")
    }

    /// 20 intercepts at once, half cancelled at once: every one ends within the timeout, and
    /// those not cancelled are answered by the plugin (not ended by the host's timeout).
    func deferredIntercepts(_ interceptor: LoadedInterceptor, _ log: ConformanceLog) async -> ExtensionOutcome {
        let problems = await Conformance.bounded(options.fetchTimeout * 2) { () async -> [String] in
            await withTaskGroup(of: String?.self) { group in
                for index in 0..<20 {
                    let request = Self.sampleRequests[index % Self.sampleRequests.count]
                    let task = Task { try await interceptor.intercept(request: request) }
                    let cancelled = index.isMultiple(of: 2)
                    if cancelled { task.cancel() }
                    group.addTask {
                        let result = await task.result
                        // As a host does, the end of a load that went on reaches an interceptor
                        // that observes it: its page, or (a cancelled load) its failure. A plugin
                        // that lets one load through at a time answers the next deferred
                        // intercept then (such a plugin failed, its intercepts never answered).
                        let observed: PluginRequest? = switch result {
                        case .success(.proceed(let next, handleAfterwards: true)), .success(.proceedOrFallBack(let next, _, _)): next
                        default: nil
                        }
                        if let next = observed, cancelled {
                            await interceptor.loadFailed(next, error: CancellationError())
                        } else if let next = observed {
                            _ = try? await interceptor.transform(page: PluginPage(request: next, values: [PluginItem(json: #"{"n":1}"#)],
                                                                                  prevKey: nil, nextKey: nil))
                        }
                        guard case .failure(let error as PluginError) = result else { return nil }
                        if error.status == PluginStatus.invalidArgument { return error.message }
                        if !cancelled && error.status == PluginStatus.timeout {
                            // Its resume may have been refused (a NULL answer): that is the cause to name.
                            let refused = log.first(containing: "resume: a NULL answer function").map { "; the host refused \"\(clip($0))\"" } ?? ""
                            return "an intercept was never answered (\(error.message))\(refused)"
                        }
                        return nil
                    }
                }
                return await group.compactMap { $0 }.reduce(into: []) { $0.append($1) }
            }
        }
        guard let problems else { return .failed("of 20 intercepts (10 cancelled at once), some did not end within \(2 * options.fetchTimeout.milliseconds) ms") }
        if let first = problems.first { return .failed(first) }
        // A second resume may come later, from another thread (it passed: only the log said so).
        try? await Task.sleep(for: .milliseconds(200))
        if let again = log.first(containing: "refused resume for deferred intercept id") {
            return .failed("resumed a deferred intercept the host did not know or had ended (a second answer, or an id defer did not give): "
                           + "the host refused \"\(clip(again))\"")
        }
        return .passed("20 intercepts, 10 of them cancelled at once, all ended")
    }

    /// failed() with sample failures: returns within the timeout.
    func loadOutcomes(_ interceptor: LoadedInterceptor) async -> ExtensionOutcome {
        let errors: [any Error] = [PluginError(.transient, "503 from upstream", plugin: "conformance"), CancellationError(),
                                   PluginError(.internal, String(repeating: "x", count: 10_000), plugin: "conformance")]
        for (request, error) in zip(Self.sampleRequests, errors) {
            guard await Conformance.bounded(options.fetchTimeout, { await interceptor.loadFailed(request, error: error) }) != nil else {
                return .failed("failed() did not return within \(timeoutText)")
            }
        }
        return .passed("failed() heard \(errors.count) failures (transient, cancelled, a 10 KB message)")
    }

    /// key_chain() with page sizes 1, 20 and 1,000 around the refresh key: no misuse.
    func sizedKeyChains(_ source: LoadedSource, _ log: ConformanceLog) async -> ExtensionOutcome {
        let before = log.lines().count
        for size in [1, 20, 1_000] {
            guard await Conformance.bounded(options.fetchTimeout, { source.keyChain(for: source.refreshKey, pageSize: size) }) != nil else {
                return .failed("key_chain() did not return within \(timeoutText)")
            }
        }
        if let failed = log.lines(from: before).first(where: { $0.contains("failed") }) { return .failed(clip(failed)) }
        return .passed("key_chain() answered for page sizes 1, 20 and 1,000")
    }

    /// refresh_key_at() for the items of the first page: no misuse; within the timeout.
    func refreshKeysAround(_ source: LoadedSource, _ log: ConformanceLog) async -> ExtensionOutcome {
        let request = refreshRequest(source)
        guard let page = try? await source.fetch(request: request), !page.values.isEmpty else {
            return .passed("skipped: the first page could not be loaded, or is empty")
        }
        let before = log.lines().count
        for index in [0, page.values.count - 1] {
            let anchor = PagingAnchor(pageKey: page.key, indexInPage: index, value: page.values[index], pageSize: request.params.pageSize)
            guard await Conformance.bounded(options.fetchTimeout, { source.refreshKey(around: anchor) }) != nil else {
                return .failed("refresh_key_at() did not return within \(timeoutText)")
            }
        }
        if let failed = log.lines(from: before).first(where: { $0.contains("failed") }) { return .failed(clip(failed)) }
        return .passed("refresh_key_at() answered for the first and last item of the first page")
    }

    // MARK: - call-handles

    func callHandles() async throws -> ConformanceResult {
        let log = ConformanceLog()
        var instances: [Instance] = []
        defer { for instance in instances { instance.destroy() } }
        var refusedCreates = 0
        for _ in 0..<3 {
            switch create(validConfig, sink: log.sink) {
            case .success(let instance): instances.append(instance)
            case .failure(let error):
                if instances.isEmpty { return skip("cannot be created with a valid config (see create-valid-config): \(error)") }
                refusedCreates += 1
            }
        }
        let creates = instances.count + refusedCreates
        var total = creates
        var calls: [String]
        switch instances[0] {
        case .source(let source):
            let walk = await walk(source, pages: 6)
            // The first instance completing none of its fetches while the last completes its
            // own: the plugin completes fetches through the host table of another instance.
            if walk.loaded == 0, let failure = walk.failures.first, instances.count > 1, case .source(let last) = instances[instances.count - 1],
               await self.walk(last, pages: 1).loaded > 0 {
                return fail("the first of \(instances.count) instances completed none of its fetches (\(failure.error)) while the last "
                            + "completed its own: each instance has a paging_host_t of its own, and a fetch is completed through "
                            + "its instance's (one kept in a global, from the last create_source, completes every instance's "
                            + "fetches on the last one)")
            }
            // Its calls did not all end: no handle use to judge them by (this passed).
            if let unreturned = walk.failures.lazy.compactMap({ self.unreturnedCall($0.error) }).first { return fail(unreturned) }
            total += creates + (source.hasKeyChain ? walk.keyChains : 0) + walk.fetches
            calls = [count(creates, "create") + ", each with refresh_key"] + (source.hasKeyChain ? ["\(walk.keyChains) key_chain"] : [])
                + [count(walk.fetches, "fetch", "fetches")]
        case .interceptor(let interceptor):
            let traffic = await drive(interceptor, rounds: 3)
            if let unanswered = traffic.unanswered { return skip("an intercept was not answered (see proceed-intact): \(unanswered)") }
            total += traffic.intercepts + (interceptor.seesPagesThrough == nil ? 0 : traffic.handles)
            calls = [count(creates, "create"), count(traffic.intercepts, "intercept")] + (interceptor.seesPagesThrough.map { [count(traffic.handles, $0)] } ?? [])
        }
        // A handle kept for a thread of the plugin's own would be used about now.
        try await Task.sleep(for: .milliseconds(200))
        let refused = log.lines().filter(Conformance.isRefusedHandle)
        guard let first = refused.first else {
            return pass("\(total) calls (\(calls.joined(separator: ", "))), no call handle used outside its call")
        }
        var functions: [String] = []
        for line in refused {
            let function = String(line.prefix { $0 != ":" })
            if !functions.contains(function) { functions.append(function) }
        }
        return fail("over \(total) calls, the host refused \(count(refused.count, "use")) of a call handle that was NULL or outside its call (\(functions.joined(separator: ", "))); the first: \"\(first)\"")
    }

    // MARK: - items-valid

    func itemsValid(_ source: LoadedSource, _ log: ConformanceLog) async -> ConformanceResult {
        let walk = await walk(source, pages: 5)
        let invalid = walk.failures.compactMap { failure in
            Conformance.invalidItem(failure.error).map { (page: failure.page, key: failure.key, message: $0) }
        }
        if let first = invalid.first {
            let more = invalid.count > 1 ? "; \(invalid.count - 1) more of the \(walk.fetches) pages fetched failed the same way" : ""
            return fail("page \(first.page) (key \(show(first.key))): \(first.message)\(more)")
        }
        if walk.loaded == 0, let failure = walk.failures.first {
            return skip("the refresh fetch failed, so there are no items to check (see fetch-completes-once): \(failure.error)")
        }
        let notes = walk.failures.map { "page \($0.page) (key \(show($0.key))) failed: \($0.error)" }
        return pass("\(count(walk.loaded, "page")), \(count(walk.items, "item")), every one valid JSON\(walk.ended ? ", then the end" : "")", notes: notes)
    }

    func itemsValid(_ interceptor: LoadedInterceptor, _ log: ConformanceLog) async -> ConformanceResult {
        let traffic = await drive(interceptor, rounds: 2)
        if let unanswered = traffic.unanswered { return skip("an intercept was not answered (see proceed-intact): \(unanswered)") }
        if let first = traffic.invalid.first {
            let more = traffic.invalid.count > 1 ? "; \(count(traffic.invalid.count - 1, "more answered page")) failed the same way" : ""
            return fail("answered \(describe(first.request)) with a page the host refused: \(first.message)\(more)")
        }
        guard traffic.answered > 0 else {
            guard traffic.failed > 0 else { return skip("never answers requests itself (\(traffic.intercepts) requests, all passed on)") }
            return skip("never answers requests itself (\(traffic.intercepts) requests: \(traffic.intercepts - traffic.failed) passed on, "
                        + "\(traffic.failed) failed, the first with: \(traffic.firstFailure ?? ""))")
        }
        return pass("answered \(traffic.answered) of \(traffic.intercepts) requests itself, \(count(traffic.answeredItems, "item")), every one valid JSON")
    }

    // MARK: - kept-pages

    /// For a page of items and an empty one, each marked shortened (pages a filter made short),
    /// and an empty one marked emptied (a short page a filter emptied): lets its request
    /// through, hands the interceptor the page, then asks for the request again: an answer with
    /// that page must carry its flag. The request as a hard refresh, and as a reload (an append,
    /// and a refresh: incremental runs send it with every request), must then proceed.
    func keptPages(_ interceptor: LoadedInterceptor, _ log: ConformanceLog) async -> ConformanceResult {
        func request(_ key: PluginKey) -> PluginRequest {
            PluginRequest(kind: .append, keyChain: PagingKeyChain(key: key, prevKey: "20", nextKey: "80"),
                          params: PagingRequestParams(pageSize: 20, userInfo: ["x-check": "kept-pages"]))
        }
        let pages: [PluginPage] = [("40", [#"{"n":41}"#, #"{"n":47}"#], false), ("60", [], false), ("70", [], true)].map { key, items, emptied in
            var page = PluginPage(request: request(PluginKey(key)), values: items.map { PluginItem(json: $0) }, prevKey: "20", nextKey: "80")
            page.isShortened = !emptied
            page.isEmptiedByTransform = emptied
            return page
        }
        do {
            for page in pages {
                let what = page.isEmptiedByTransform ? "an empty page a filter emptied"
                    : page.values.isEmpty ? "an empty page" : "a page of \(count(page.values.count, "item"))"
                switch try await interceptor.intercept(request: page.request) {
                case .complete, .completeThenRevalidate:
                    return skip("answers the request before it was handed a page for it: keeps no pages it is handed")
                case .proceed(_, let observe) where !observe:
                    return skip("does not ask to see the pages of the requests it lets through")
                case .proceed, .proceedOrFallBack:
                    _ = try await interceptor.transform(page: page)
                }
                let kept: PluginPage
                switch try await interceptor.intercept(request: page.request) {
                case .complete(let answer), .completeThenRevalidate(let answer), .proceedOrFallBack(_, let answer, _):
                    kept = answer
                case .proceed:
                    return skip("does not answer a request with the page it was handed for it (\(what))")
                }
                guard kept.values == page.values else {
                    return skip("answers the request with other items than the page it was handed for it (\(what); \(count(kept.values.count, "item")))")
                }
                guard kept.isShortened == page.isShortened, kept.isEmptiedByTransform == page.isEmptiedByTransform else {
                    let flag = page.isShortened ? "PAGING_PAGE_SHORTENED" : "PAGING_PAGE_EMPTIED"
                    return fail("answered a request with the page it was handed for it (\(what)), without that page's \(flag) flag: "
                                + "keep the flags of the page handle() sees and set them back with out_set_flags, or a page a filter made "
                                + "short or empty, answered after a filter, reads as the end of the data")
                }
            }
            // The last page handed, as the host sends them: a hard refresh is a refresh; a reload
            // an append, or a refresh of an incremental run.
            let last = pages[pages.count - 1].request
            for (name, kind) in [(PagingUserInfoKey.hardRefresh, PagingRequestKind.refresh), (PagingUserInfoKey.reload, .append),
                                 (PagingUserInfoKey.reload, .refresh)] {
                var again = PluginRequest(kind: kind, keyChain: last.keyChain, params: last.params)
                again.params.userInfo[name] = "true"
                switch try await interceptor.intercept(request: again) {
                case .complete, .completeThenRevalidate:
                    return fail("answered \(kind == .refresh ? "a refresh" : "an append") with the param \(name) = \"true\" from the page it kept: "
                                + "it must let it proceed to the source (types.h)")
                case .proceed, .proceedOrFallBack:
                    continue
                }
            }
        } catch {
            return skip("a call failed: \(error)")
        }
        return pass("answered with the pages it kept (one of items, two empty), their flags kept; let the request through as a hard refresh and as a reload")
    }

    // MARK: - Driving

    /// "1 page", "5 pages".
    func count(_ number: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(number) \(number == 1 ? singular : plural ?? singular + "s")"
    }

    /// Fetches up to `pages` pages from the refresh key on, each after its key_chain, following
    /// the page's next key (or the chain's, when a page fails).
    func walk(_ source: LoadedSource, pages limit: Int) async -> SourceWalk {
        var walk = SourceWalk()
        var key = source.refreshKey, kind = PagingRequestKind.refresh
        var seen: Set<PluginKey> = [key]
        while walk.fetches < limit {
            let chain = source.keyChain(for: key)
            walk.keyChains += 1
            walk.fetches += 1
            let next: PluginKey?
            do {
                let page = try await source.fetch(request: PluginRequest(kind: kind, keyChain: chain, params: params))
                walk.loaded += 1
                walk.items += page.values.count
                next = page.nextKey
            } catch {
                walk.failures.append((walk.fetches, key, error))
                // Every later fetch would wait out the timeout as well (and the check's own
                // time limit with them).
                if (error as? PluginError)?.status == .timeout { break }
                next = chain.nextKey
            }
            guard let next else {
                walk.ended = true
                break
            }
            guard seen.insert(next).inserted else { break }
            key = next
            kind = .append
        }
        return walk
    }

    /// The sample requests, `rounds` times: intercept each, pass what proceeds to a recording
    /// source, and hand its page to handle() when the interceptor asks to observe it.
    func drive(_ interceptor: LoadedInterceptor, rounds: Int) async -> InterceptorTraffic {
        let source = RecordingSource()
        var traffic = InterceptorTraffic()
        for _ in 0..<rounds {
            for request in Self.sampleRequests {
                traffic.intercepts += 1
                do {
                    switch try await interceptor.intercept(request: request) {
                    case .proceed(let next, let observe):
                        guard observe else { continue }
                        let page = try await source.fetch(request: next)
                        // The pipeline's call: transform() when offered (its handles were
                        // left out: one kept for a later call passed), else handle().
                        _ = try await interceptor.transform(page: page)
                        traffic.handles += 1
                    case .complete(let page), .completeThenRevalidate(let page):
                        traffic.answered += 1
                        traffic.answeredItems += page.values.count
                    case .proceedOrFallBack(let next, _, _):
                        let page = try await source.fetch(request: next)
                        _ = try await interceptor.transform(page: page)
                        traffic.handles += 1
                    }
                } catch {
                    if let error = error as? PluginError, error.status == .timeout {
                        traffic.unanswered = error.message
                        return traffic
                    }
                    guard let message = Conformance.invalidItem(error) else {
                        traffic.failed += 1
                        if traffic.firstFailure == nil { traffic.firstFailure = "\(error)" }
                        continue
                    }
                    traffic.answered += 1
                    traffic.invalid.append((request, message))
                }
            }
        }
        return traffic
    }
}
