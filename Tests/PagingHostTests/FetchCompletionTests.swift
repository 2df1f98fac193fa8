import CPaging
import Foundation
@testable import PagingHost
@testable import PagingPluginKit
import Testing

/// PagingPluginKit's completion of a fetch, against the host's table.
@Suite("A Swift plugin's fetch completion")
struct FetchCompletionTests {
    /// Found by a probe: four threads completing one fetch at once had their items added to one
    /// page before any of them completed it (20 or 30 items for a page of 10, each printed
    /// twice, exit 0). The first completion is the one; the others are refused and logged.
    @Test func completionsAtOnce_fromManyThreads_giveOnePage() throws {
        let log = LogRecorder()
        for round in 0..<50 {
            let instance = PluginInstance(label: "racer", sink: log.sink, limits: PluginLimits())
            let id = UInt64(round + 1)
            instance.fetches.withLock { $0[id] = PendingFetch() }
            let completion = FetchCompletion(host: PluginHost(table: instance.table), id: id)
            let page = PageContent(items: (0..<10).map { Array(#"{"n":\#($0)}"#.utf8) }, isFirst: true, isLast: true)
            DispatchQueue.concurrentPerform(iterations: 4) { _ in completion.succeed(page) }
            let result = instance.fetches.withLock { $0[id]?.result }
            guard case .completed(let builder)? = result else {
                Issue.record("round \(round): \(String(describing: result))")
                return
            }
            #expect(builder.items.count == 10, "round \(round)")
        }
        #expect(log.contains("succeed for unknown or finished fetch id 1: it was completed already (PagingPluginKit); refused"), "\(log.messages.prefix(5))")
    }

    /// Found by a probe: a NUL in a failure message ended it there, and what followed it was
    /// lost. It is written `\0`.
    @Test func aFailureMessageHoldingANul_reachesTheHostWhole() {
        let instance = PluginInstance(label: "nul", sink: LogRecorder().sink, limits: PluginLimits())
        instance.fetches.withLock { $0[1] = PendingFetch() }
        FetchCompletion(host: PluginHost(table: instance.table), id: 1).fail(.notFound("no row\0 for key 7"))
        let result = instance.fetches.withLock { $0[1]?.result }
        guard case .failed(let status, let message, _)? = result else {
            Issue.record("\(String(describing: result))")
            return
        }
        #expect(status == .notFound)
        #expect(message == #"no row\0 for key 7"#)
    }
}

/// PagingPluginKit's answer to an intercept, against the host's table.
@Suite("A Swift interceptor's decision")
struct InterceptDecisionTests {
    final class Sizer: InterceptorPlugin {
        static let info = PluginInfo(id: "sizer", name: "Sizer", version: "1.0.0", description: "proceeds with a page size")
        init(host: PluginHost, config: PagingPluginKit.PluginConfig) {}
        func intercept(_ request: PagingPluginRequest) -> InterceptDecision { .proceed(observe: false) }
    }

    /// Found by a probe: `.proceed(pageSize: -5)` was clamped to 0, and the host refused "a
    /// page size of 0", a size the plugin never gave. The intercept now fails naming it.
    @Test(arguments: [-5, 0, Int(UInt32.max) + 1])
    func aProceedWithAPageSizeOutOfRange_failsNamingIt(_ size: Int) throws {
        let instance = PluginInstance(label: "sizer", sink: LogRecorder().sink, limits: PluginLimits())
        let host = PluginHost(table: instance.table)
        let box = InterceptorBox(Sizer(host: host, config: PagingPluginKit.PluginConfig(host: instance.table, config: nil)), host: host)
        var out = InterceptOut(instance: instance)
        let code = out.withHandle(CallHandle.token(for: instance)) { box.apply(.proceed(observe: false, pageSize: size), $0) }
        #expect(code == PAGING_INTERCEPT_FAIL)
        #expect(out.misuse == nil)
        #expect(out.failure?.1 == "the interceptor's decision .proceed(pageSize: \(size)): a page size is 1 or more")
    }
}

/// The host's refusals of call handles, against the host's table.
@Suite("A call handle refused")
struct CallHandleRefusalTests {
    /// Found by a probe: an intercept's `out` kept and passed to another kind of call was named
    /// as a handle of the kind expected ("a keys out handle kept from an earlier call"), which
    /// sent its author looking in the wrong call. The handle says its kind.
    @Test func aKeptHandleOfAnotherKind_isNamedAsWhatItIs() {
        let log = LogRecorder()
        let instance = PluginInstance(label: "kinds", sink: log.sink, limits: PluginLimits())
        var out = InterceptOut(instance: instance)
        let kept = out.withHandle(CallHandle.token(for: instance)) { $0 }
        var keys = KeysOut()
        var key = paging_bytes_t(data: nil, len: 0)
        let status = keys.withHandle(CallHandle.token(for: instance)) { _ in instance.table.pointee.keys_set(kept, UInt32(PAGING_KEY_NEXT), &key) }
        let refusal = "keys_set: an out (intercept) handle kept from an earlier call, used during a later one, "
            + "where a keys out (refresh_key/key_chain) handle was expected; refused"
        #expect(status == PAGING_ERR_INVALID_ARGUMENT)
        #expect(log.contains(refusal), "\(log.messages)")
        // The call it was used in fails (a keys out of its own kind would have too).
        #expect(keys.misuse == refusal)
    }
}

/// What PagingPluginKit reads of a page the host hands a plugin.
@Suite("A page a Swift plugin sees")
struct PluginPageViewTests {
    /// Found by a newcomer: a Swift transform could not read the metadata an interceptor
    /// before it attached (the guide says a plugin reads "the count an earlier filter left").
    @Test func aPagesMetadata_isRead_whenTheHostsPageHoldsIt() {
        let name = Array("kept".utf8), value = Array("3".utf8)
        var request = paging_request_t()
        request.struct_size = UInt32(MemoryLayout<paging_request_t>.size)
        name.withUnsafeBufferPointer { name in
            value.withUnsafeBufferPointer { value in
                var entry = paging_param_t(name: paging_bytes_t(data: name.baseAddress, len: name.count),
                                           value: paging_bytes_t(data: value.baseAddress, len: value.count))
                withUnsafePointer(to: &request) { request in
                    withUnsafePointer(to: &entry) { entries in
                        var page = paging_page_t()
                        page.request = request
                        page.struct_size = UInt32(MemoryLayout<paging_page_t>.size)
                        page.metadata = entries
                        page.metadata_count = 1
                        withUnsafePointer(to: &page) { #expect(PagingPluginPage($0).metadata == ["kept": "3"]) }
                        // A host older than ABI 1.1: its page ends before the metadata.
                        page.struct_size = UInt32(MemoryLayout<paging_page_t>.offset(of: \.metadata)!)
                        withUnsafePointer(to: &page) { #expect(PagingPluginPage($0).metadata.isEmpty) }
                    }
                }
            }
        }
    }
}
