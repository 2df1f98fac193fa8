import FoundationEssentials
import Glibc
import PagingConformance
import PagingHost

/// `pager plugins [DIR...]`: lists every plugin found, with its descriptor.
struct PluginsCommand {
    static let help = """
    usage: pager plugins [DIR...]

    Lists every plugin of every lib*.so in the folders (default: PAGING_PLUGIN_PATH and the
    built products folder), with its descriptor. Each library is opened in a child process: one
    that fails to load, crashes, exits or hangs while loading is a line of its own on stderr,
    with the reason, and the others are listed.

    exit codes: 0 listed; 2 a folder does not exist
    """

    var folders: [String] = []

    init(_ arguments: [String]) throws {
        for argument in arguments {
            switch argument {
            case "--help", "-h":
                Output.line(Self.help)
                throw HelpShown()
            case _ where argument.hasPrefix("-"): throw UsageError("plugins: unknown option '\(shown(argument))'\n\n\(Self.help)")
            default: folders.append(argument)
            }
        }
    }

    func run() async throws -> Int32 {
        let folders = self.folders.isEmpty ? PluginSearchPath.standard(manifestFolder: nil).folders : self.folders
        var libraries: [String] = []
        for folder in folders {
            var isFolder = false
            guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder else {
                if self.folders.isEmpty { continue }
                let exists = FileManager.default.fileExists(atPath: folder)
                throw UsageError("plugins: \(shown(folder)): \(exists ? "not a folder (plugins lists the libraries of folders)" : "no such folder")")
            }
            let files = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            for file in files.sorted() where file.hasPrefix("lib") && file.hasSuffix(".so") {
                libraries.append(URL(fileURLWithPath: folder).appendingPathComponent(file).path)
            }
        }
        guard let executable = PluginSearchPath.executableFolder().map({ $0 + "/" + CheckCommand.executableName() }) else {
            throw UsageError("plugins: cannot find the pager executable (/proc/self/exe)")
        }
        // Each library is opened in a child process (`pager check __list`): one that crashes,
        // exits or hangs while loading is a line of its own, and the others are listed.
        let scratch = FileManager.default.temporaryDirectory.path + "/pager-plugins-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let runner = ConformanceRunner(executable: executable, options: ConformanceOptions(scratchFolder: scratch))
        let paths = libraries
        let listings = await withTaskGroup(of: (Int, Result<ConformanceListing, ConformanceRunner.ListingFailure>).self) { group in
            var results = [Result<ConformanceListing, ConformanceRunner.ListingFailure>?](repeating: nil, count: paths.count)
            var next = 0
            // Two at a time: a child per core.
            while next < paths.count && next < 2 {
                let index = next, path = paths[index]
                group.addTask { (index, await runner.list(library: path)) }
                next += 1
            }
            while let (index, result) = await group.next() {
                results[index] = result
                if next < paths.count {
                    let index = next, path = paths[index]
                    group.addTask { (index, await runner.list(library: path)) }
                    next += 1
                }
            }
            return results
        }
        var found = 0
        for (path, listing) in zip(libraries, listings) {
            switch listing {
            case .success(let listing)?:
                if let problem = listing.badInput ?? listing.libraryProblem {
                    Output.problem(problem)
                    continue
                }
                // Descriptors refused for one reason (two sharing an id) say it once.
                var refusals: Set<String> = []
                for plugin in listing.plugins {
                    if let refusal = plugin.refusal {
                        if refusals.insert(refusal).inserted { Output.problem(refusal) }
                        continue
                    }
                    found += 1
                    // A library's texts, escaped and cut: one line a plugin, whatever they hold.
                    let fields = [plugin.id, plugin.kind ?? "?", plugin.version ?? "?", path, plugin.name ?? "", plugin.description ?? ""]
                        .map { OneLine.escape($0, limit: 1_024) }
                    Output.line("\(fields[0])\t\(fields[1])\t\(fields[2])\t\(fields[3])\t\(fields[4]): \(fields[5])"
                                + (plugin.threadSafe ? " [thread-safe]" : ""))
                }
            case .failure(let failure)?:
                Output.problem("\(path): \(failure.reason)")
            case nil:
                Output.problem("\(path): not listed")
            }
        }
        Output.error(Output.counted(found, "plugin"))
        return ExitCode.success
    }
}
