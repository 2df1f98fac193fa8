import CPaging
import FoundationEssentials
import Glibc
import PagingHost

extension Conformance {
    /// Opens the library and checks every descriptor (the `descriptor` check). Runs in the
    /// listing process: a library that crashes while loading cannot take the validator down.
    /// A plugin that requires an extension in `withheld` is refused, as by an older host.
    public static func list(path: String, withholding withheld: Set<String> = []) -> ConformanceListing {
        let start = ContinuousClock.now
        func done(badInput: String? = nil, problem: String? = nil, _ plugins: [ConformancePluginListing] = []) -> ConformanceListing {
            ConformanceListing(badInput: badInput, libraryProblem: problem, plugins: plugins, durationMs: milliseconds(since: start))
        }
        do {
            let library = try PluginLibrary.open(path: path)
            var plugins = scan(library.entry, runnable: true)
            for index in plugins.indices {
                guard let descriptor = library.descriptors.first(where: { $0.id == plugins[index].id }) else { continue }
                do {
                    _ = try library.descriptor(id: descriptor.id, kind: descriptor.kind, withholding: withheld)
                } catch {
                    // A required extension this host lacks: the loader's one line says which.
                    plugins[index].refusal = error.description
                }
            }
            return done(plugins)
        } catch {
            switch error {
            case .fileNotFound, .notAFile, .notARegularFile, .unreadable, .notASharedObject, .loadFailed, .noEntrySymbol:
                return done(badInput: error.description)
            case .abiMajorMismatch:
                // A different major may lay its tables out differently: read nothing more.
                return done(problem: error.description)
            case .invalidEntry:
                // The host refuses the library; read its descriptors raw to say which is wrong.
                let standardized = URL(fileURLWithPath: path).standardizedFileURL.path
                guard let handle = dlopen(standardized, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE),
                      let symbol = dlsym(handle, PAGING_PLUGIN_ENTRY_SYMBOL_NAME),
                      let entry = unsafeBitCast(symbol, to: paging_plugin_entry_fn.self)(),
                      entry.pointee.plugin_count != nil, entry.pointee.descriptor != nil
                else { return done(problem: error.description) }
                var plugins = scan(entry, runnable: false)
                // A struct smaller than any ABI 1.0 one is a build problem: abi-growth reports it.
                let entryTooSmall = ABISizes.isTooSmall(entry.pointee.struct_size, draft: ABISizes.draftEntry)
                for index in plugins.indices {
                    guard let descriptor = entry.pointee.descriptor?(UInt32(index)) else { continue }
                    if entryTooSmall || ABISizes.isTooSmall(descriptor.pointee.struct_size, draft: ABISizes.draftDescriptor) {
                        plugins[index].refusal = error.description
                    }
                }
                return done(problem: error.description, plugins)
            default:
                return done(problem: error.description)
            }
        }
    }

    /// Reads every descriptor as the library states it (not as the host tidies it up).
    static func scan(_ entry: UnsafePointer<paging_plugin_entry_t>, runnable: Bool) -> [ConformancePluginListing] {
        guard let count = entry.pointee.plugin_count, let describe = entry.pointee.descriptor else { return [] }
        let total = min(count(), 1_000)
        var plugins: [ConformancePluginListing] = []
        var firstIndex: [String: Int] = [:]
        for index in 0..<total {
            guard let raw = describe(index) else {
                plugins.append(ConformancePluginListing(id: "#\(index)", kind: nil, threadSafe: false,
                                                        problems: ["descriptor(\(index)) returned NULL"], runnable: false))
                continue
            }
            let d = raw.pointee
            var problems: [String] = []
            let id = d.id.map { String(cString: $0) }
            let isText = d.id.map { String(validatingCString: $0) != nil } ?? true
            let shownID: String
            if let id, !id.isEmpty, isText {
                shownID = id
                if id.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0 == "\u{7F}" }) {
                    problems.append("id \"\(id)\" contains spaces or control characters")
                }
                if let first = firstIndex[id] {
                    problems.append("id \"\(id)\" is also the id of plugin #\(first)")
                } else {
                    firstIndex[id] = Int(index)
                }
            } else {
                shownID = "#\(index)"
                problems.append(id == nil ? "id is NULL" : !isText ? "id is not UTF-8 text (a manifest names a plugin by its id)" : "id is empty")
            }
            if (d.name.map { String(cString: $0) } ?? "").trimmingWhitespace.isEmpty {
                problems.append(d.name == nil ? "name is NULL" : "name is empty")
            }
            let version = d.version.map { String(cString: $0) }
            if let version {
                if !isSemverLike(version) { problems.append("version \"\(version)\" is not MAJOR.MINOR[.PATCH][-PRERELEASE]") }
            } else {
                problems.append("version is NULL")
            }
            if d.description == nil { problems.append("description is NULL") }
            let kind = PluginKind(d.kind)
            switch kind {
            case nil: problems.append("kind \(d.kind) is neither PAGING_PLUGIN_SOURCE (1) nor PAGING_PLUGIN_INTERCEPTOR (2)")
            case .source? where entry.pointee.create_source == nil: problems.append("a source, but the entry's create_source is NULL")
            case .interceptor? where entry.pointee.create_interceptor == nil: problems.append("an interceptor, but the entry's create_interceptor is NULL")
            default: break
            }
            if d.flags & ~PAGING_PLUGIN_THREAD_SAFE != 0 { problems.append("unknown flags 0x\(String(d.flags, radix: 16))") }
            let abi = PluginABIVersion(d.abi_version)
            if abi.major != PluginABIVersion.host.major {
                problems.append("descriptor built for ABI \(abi), the host implements \(PluginABIVersion.host)")
            }
            plugins.append(ConformancePluginListing(
                id: shownID, kind: kind?.rawValue, threadSafe: d.flags & PAGING_PLUGIN_THREAD_SAFE != 0,
                problems: problems, runnable: runnable && kind != nil && id?.isEmpty == false && isText && firstIndex[shownID] == Int(index),
                name: d.name.map { String(cString: $0) }, version: version, description: d.description.map { String(cString: $0) }))
        }
        if describe(total) != nil {
            for index in plugins.indices {
                plugins[index].problems.append("descriptor(\(total)) (past the last plugin) returned non-NULL")
            }
        }
        return plugins
    }

    /// "1.0", "1.2.3", "2.0.0-beta.1", "1.0.0+build.5".
    static func isSemverLike(_ text: String) -> Bool {
        var core = Substring(text)
        if let cut = core.firstIndex(where: { $0 == "-" || $0 == "+" }) {
            let suffix = core[core.index(after: cut)...]
            guard !suffix.isEmpty, suffix.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "+") }) else {
                return false
            }
            core = core[..<cut]
        }
        let parts = core.split(separator: ".", omittingEmptySubsequences: false)
        return (2...3).contains(parts.count) && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }
    }

    static func milliseconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) * 1_000 + Double(elapsed.components.attoseconds) / 1e15
    }
}
