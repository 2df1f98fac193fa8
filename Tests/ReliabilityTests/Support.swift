// Helpers of the reliability tests beyond the shared ones (PagingTestSupport).
import Foundation
import Paging
import PagingHost
@_exported import PagingTestSupport

/// The built `pager` command.
let pagerBinary = pagerCommand

/// The numbers of items written by ``writeJSONLines(count:to:)``.
func lineNumbers(_ values: some Sequence<PluginItem>) -> [Int] {
    values.map { item in
        let text = item.text
        guard text.hasPrefix(#"{"n":"#), text.hasSuffix("}"), let n = Int(text.dropFirst(5).dropLast()) else { return -1 }
        return n
    }
}

func params(pageSize: Int, retry: RetryPolicy = .none, userInfo: [String: String] = [:]) -> PagingRequestParams {
    PagingRequestParams(pageSize: pageSize, retryPolicy: retry, userInfo: userInfo)
}

extension Duration {
    var milliseconds: Double {
        Double(components.seconds) * 1e3 + Double(components.attoseconds) / 1e15
    }
}

/// Prints a figure of a test run, so that it shows in the log.
func report(_ text: String) {
    FileHandle.standardError.write(Data("[reliability] \(text)\n".utf8))
}
