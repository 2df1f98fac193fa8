// A pass-through interceptor as a Swift plugin: every request proceeds unchanged and no page is
// observed. It measures what a Swift plugin costs per call (the benchmark's "loaded as Swift
// .so" row), and is the smallest complete Swift interceptor plugin to copy from.
//
// Config: none.
import PagingPluginKit

final class PassThroughPlugin: InterceptorPlugin {
    static let info = PluginInfo(
        id: "pass-through", name: "Pass-through", version: "1.0.0",
        description: "Lets every request proceed unchanged", isThreadSafe: true)

    /// A key in its config is refused: taken without a word, a misplaced one (meant for the
    /// plugin after it) went unnoticed.
    init(host: PluginHost, config: PluginConfig) throws(PluginFailure) {
        try config.rejectUnknownKeys([])
    }

    func intercept(_ request: PagingPluginRequest) -> InterceptDecision {
        .proceed(observe: false)
    }
}

@c(paging_plugin_entry)
public func pagingPluginEntry() -> UnsafeRawPointer { PluginExport.entry(PassThroughPlugin.self) }
