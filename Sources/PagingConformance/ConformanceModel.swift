import FoundationEssentials
import PagingHost

/// One check of the plugin conformance suite (`pager check`).
///
/// Every check runs in a process of its own (see ``ConformanceRunner``), so that a plugin that
/// crashes or hangs fails that check instead of taking the validator down.
public enum ConformanceCheck: String, Sendable, CaseIterable, Codable {
    /// Ids non-empty, unique, without spaces; a name; a semver-like version; a valid kind; the
    /// host's ABI major. Run for the whole library in one process (the listing).
    case descriptor
    /// The library grows safely with the ABI (version.h): its entry and descriptor say
    /// struct_size at least ABI 1.0's, and so does the instance table create_* returns; the
    /// instance's get_extension answers NULL for an id it does not offer (an unknown one, and
    /// ""). A library built against the 1.0 draft headers (struct_size 0) passes with a note;
    /// the host's refusal (a struct smaller than 1.0's, a required host extension this host
    /// lacks) fails it with the loader's message.
    case abiGrowth = "abi-growth"
    /// Create and destroy with `{}`: a successful create or a clean failure (a code and a message).
    case createEmptyConfig = "create-empty-config"
    /// Create and destroy with a valid config (given, or the suite's sample for shipped
    /// plugins, or `{}`): must succeed.
    case createValidConfig = "create-valid-config"
    /// Create with invalid configs (unknown keys, known keys of the wrong type): a successful
    /// create or a clean failure, never a crash.
    case createInvalidConfig = "create-invalid-config"
    /// Create/destroy cycles (1,000 by default) without the process growing (VmRSS).
    case createDestroyCycles = "create-destroy-cycles"
    /// Source: refresh_key succeeds and names a key.
    case refreshKey = "refresh-key"
    /// Source: a fetch completes (or fails) exactly once, within the timeout.
    case fetchCompletesOnce = "fetch-completes-once"
    /// Source: over 10 appended pages, each page's previous key is the page before's key and no
    /// key repeats; stops at the end.
    case keysChain = "keys-chain"
    /// Source: cancelling at random points (and unknown or finished ids) is safe, and every
    /// fetch finishes.
    case cancelSafe = "cancel-safe"
    /// Source: destroy() with fetches in flight; the plugin must not call the host afterwards
    /// (the host table is only valid until destroy() returns).
    case destroyInFlight = "destroy-in-flight"
    /// Interceptor: a proceeding request reaches the source intact, or rewritten (key, page
    /// size, params: reported as info); never mangled, never a misuse of the host.
    case proceedIntact = "proceed-intact"
    /// Interceptor: handle() - or transform(), for an instance that offers
    /// paging.page-transform/1 - accepts any page (empty, 1,000 items, odd bytes, no keys)
    /// without misusing the host.
    case handleAnyPage = "handle-any-page"
    /// Source: about 5 pages (following the keys); interceptor: the pages of the requests it
    /// answers itself (COMPLETE). The host fails a page holding an item that is not one JSON value
    /// in valid UTF-8 ("item N is not valid JSON: ..."): none may. Skipped for an interceptor
    /// that never answers a request.
    case itemsValid = "items-valid"
    /// Interceptor: one that answers a request with the page it was handed for it (a cache, a
    /// store) answers with that page's flags (PAGING_PAGE_SHORTENED: a filtered page read back
    /// without it reads as the end of the data), and lets the same request proceed as a hard
    /// refresh and as a reload. Skipped for one that answers no request from a page it was
    /// handed.
    case keptPages = "kept-pages"
    /// The plugin's normal calls (creates; intercepts and handles, or refresh_key, key_chain and
    /// fetches) without a call handle (config, out, keys out) used after its call or from
    /// another thread: the host refuses and logs each such use.
    case callHandles = "call-handles"
    /// Each instance extension the plugin offers works, within the timeout: paging.health/1
    /// answers PAGING_OK or a PAGING_ERR_* code; paging.page-transform/1 transforms sample pages
    /// without misusing the builder; paging.async-intercept/1 ends 20 deferred intercepts, 10 of
    /// them cancelled at once; paging.load-outcome/1 hears sample failures;
    /// paging.sized-key-chain/1 and paging.invalidation/1 answer keys without misuse. Skipped
    /// when it offers none.
    case extensions
    /// A plugin flagged thread-safe: 4 tasks x 500 concurrent calls (fewer fetches for a source
    /// whose fetch takes long to complete), no crash, consistent results.
    case threadSafe = "thread-safe"

    /// The checks that apply to a plugin of `kind`, in the order they run (after `descriptor`).
    public static func checks(for kind: PluginKind) -> [ConformanceCheck] {
        let common: [ConformanceCheck] = [.abiGrowth, .createEmptyConfig, .createValidConfig, .createInvalidConfig, .createDestroyCycles]
        let last: [ConformanceCheck] = [.callHandles, .extensions, .threadSafe]
        switch kind {
        case .source: return common + [.refreshKey, .fetchCompletesOnce, .keysChain, .itemsValid, .cancelSafe, .destroyInFlight] + last
        case .interceptor: return common + [.proceedIntact, .handleAnyPage, .itemsValid, .keptPages] + last
        }
    }
}

/// The outcome of one check of one plugin.
public struct ConformanceResult: Sendable, Codable, Equatable {
    public enum Status: String, Sendable, Codable {
        case pass = "PASS"
        case fail = "FAIL"
        /// Not applicable, or impossible because an earlier check failed (the reason says which).
        case skip = "SKIP"
    }

    /// The plugin id ("-" for the library as a whole).
    public var plugin: String
    public var check: String
    public var status: Status
    /// Why it failed or was skipped; for a pass, what was seen (may be empty).
    public var reason: String
    /// Information that is not a failure (e.g. "rewrites the request's params").
    public var notes: [String]
    public var durationMs: Double

    enum CodingKeys: String, CodingKey { case plugin, check, status, reason, notes, durationMs = "duration_ms" }

    public init(plugin: String, check: String, status: Status, reason: String = "", notes: [String] = [], durationMs: Double = 0) {
        self.plugin = plugin
        self.check = check
        self.status = status
        self.reason = reason
        self.notes = notes
        self.durationMs = durationMs
    }
}

/// What a check may use: the config, the fetch timeout, how many create/destroy cycles.
public struct ConformanceOptions: Sendable {
    /// A valid config for the plugin; `nil`: the suite's sample for shipped plugins, else `{}`.
    public var config: JSONValue?
    /// How long one fetch may take before it counts as never completed.
    public var fetchTimeout: Duration
    public var cycles: Int
    /// A folder the checks may write to (sample files, databases).
    public var scratchFolder: String
    /// Host extensions the plugin is not offered, as an older host would not offer them
    /// (``PluginLimits/withheldExtensions``).
    public var withheldExtensions: Set<String>

    public init(config: JSONValue? = nil, fetchTimeout: Duration = .seconds(5), cycles: Int = 1_000, scratchFolder: String,
                withheldExtensions: Set<String> = []) {
        self.config = config
        self.fetchTimeout = fetchTimeout
        self.cycles = cycles
        self.scratchFolder = scratchFolder
        self.withheldExtensions = withheldExtensions
    }
}

/// One plugin of a library as the listing saw it, with what the descriptor check found.
public struct ConformancePluginListing: Sendable, Codable {
    /// The id, or "#INDEX" when the descriptor has none.
    public var id: String
    /// "source", "interceptor", or nil when the kind is not valid.
    public var kind: String?
    public var threadSafe: Bool
    /// The descriptor problems; empty = the descriptor check passes.
    public var problems: [String]
    /// The other checks can run: the host loads the library and the plugin.
    public var runnable: Bool
    /// The loader's message when the host refuses this plugin for how it was built (a struct
    /// smaller than ABI 1.0's, a required extension this host lacks): only abi-growth runs, and
    /// reports it.
    public var refusal: String?
    /// The descriptor's name, version and description, as `pager plugins` prints them.
    public var name: String?
    public var version: String?
    public var description: String?
}

/// What the listing process reports about a library.
public struct ConformanceListing: Sendable, Codable {
    /// Set when the file is not a loadable plugin library at all (bad input, exit 2).
    public var badInput: String?
    /// Set when the host refuses the library (ABI major, invalid entry): a failure, not bad input.
    public var libraryProblem: String?
    public var plugins: [ConformancePluginListing]
    public var durationMs: Double
}

/// A JSON line a check process prints on stdout, marked so that a plugin's own output cannot be
/// taken for it.
public enum ConformanceWire {
    public static let marker = "@@pager-check@@ "

    public static func line(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return marker + String(decoding: data, as: UTF8.self)
    }

    /// The value of the last marked line of `output`.
    public static func decode<T: Decodable>(_ type: T.Type, from output: String) -> T? {
        for line in output.split(separator: "\n").reversed() where line.hasPrefix(marker) {
            return try? JSONDecoder().decode(type, from: Data(line.dropFirst(marker.count).utf8))
        }
        return nil
    }
}
