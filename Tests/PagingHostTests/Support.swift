import Foundation
import Paging
import PagingHost
@_exported import PagingTestSupport

func params(pageSize: Int, retry: RetryPolicy = .none, userInfo: [String: String] = [:]) -> PagingRequestParams {
    PagingRequestParams(pageSize: pageSize, retryPolicy: retry, userInfo: userInfo)
}

extension Array where Element == PluginItem {
    var texts: [String] { map(\.text) }
}
