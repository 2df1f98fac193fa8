// What the http fixture servers recorded (Tests/Fixtures/http/*.py answer GET /seen).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import PagingTestSupport
import Testing

extension FixtureServer {
    /// The requests the server recorded (GET /seen), one dictionary each.
    func seen() async throws -> [[String: Any]] {
        let (data, _) = try await URLSession.shared.data(from: URL(string: baseURL + "/seen")!)
        return try String(decoding: data, as: UTF8.self).split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }
}
