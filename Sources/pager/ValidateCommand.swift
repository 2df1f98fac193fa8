import Foundation
import PagingHost

/// `pager validate MANIFEST`: loads and checks every plugin, fetches nothing.
struct ValidateCommand {
    static let help = """
    usage: pager validate MANIFEST [options]

    Reads the manifest, finds, checks (sha256 pins, ABI version, kind) and creates every plugin
    with its config, then prints a summary. Nothing is fetched.

    options:
    \(LogOptions.help)
      --help        this text

    exit codes: 0 the manifest and its plugins are valid; 2 they are not (one line on stderr
    naming the file, the JSON path or plugin, and the reason)
    """

    var manifestPath: String?
    var log: LogOptions

    init(_ arguments: [String]) throws {
        var log = LogOptions()
        manifestPath = try Arguments.parse(arguments, command: "validate", help: Self.help) { argument, _ in log.parse(argument) }
        self.log = log
    }

    func run() throws -> Int32 {
        guard let manifestPath else { throw UsageError("validate: a manifest is required\n\n\(Self.help)") }
        let manifest = try Manifest.load(path: manifestPath)
        let pipeline = try Pipeline(manifest: manifest, sink: Output.pluginLog(minimum: log.level))
        Output.line("\(manifestPath): ok")
        Output.line("  source: \(describe(pipeline.source.descriptor, pipeline.source.library))")
        for interceptor in pipeline.interceptors {
            Output.line("  interceptor: \(describe(interceptor.descriptor, interceptor.library))")
        }
        Output.line("  page size \(manifest.pageSize), retries \(manifest.retryPolicy.maxRetries), timeout \(manifest.fetchTimeout)")
        return ExitCode.success
    }

    private func describe(_ descriptor: PluginDescriptor, _ library: PluginLibrary) -> String {
        "\(descriptor.id) \(descriptor.version) (\(library.path), ABI \(library.abiVersion))"
    }
}
