import FoundationEssentials
import Glibc
import PagingHost

extension Conformance {
    /// A valid config for `id`: the user's, else a sample for the shipped plugins (writing what
    /// it needs into the scratch folder), else `{}`.
    static func validConfig(for id: String, _ options: ConformanceOptions) -> JSONValue {
        if let config = options.config { return config }
        let unique = "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        switch id {
        case "jsonlines":
            // 95 lines: with pages of 20, five pages, the last one short.
            let path = "\(options.scratchFolder)/sample-\(unique).jsonl"
            let text = (0..<95).map { #"{"n":\#($0),"name":"item \#($0)"}"# }.joined(separator: "\n") + "\n"
            _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
            return .object([("path", .string(path))])
        case "sqlite-store":
            return .object([("path", .string("\(options.scratchFolder)/store-\(unique).sqlite")), ("namespace", .string("check"))])
        case "http":
            // Nothing listens on port 1: fetches fail at once with a transient error, which is
            // enough to check completion and cancellation (not the keys).
            return .object([("url", .string("http://127.0.0.1:1/items?page={key}&per_page={pageSize}")), ("timeout_ms", .int(2_000))])
        case "logging":
            return .object([("level", .string("debug")), ("label", .string("check"))])
        case "cache":
            return .object([("ttl_seconds", .int(60)), ("max_entries", .int(100))])
        case "rate-limit":
            // Fast enough that the checks' hundreds of intercepts wait only now and then.
            return .object([("per_second", .int(20_000)), ("burst", .int(100))])
        case "c-counter":
            return .object([("label", .string("check"))])
        case "postgres-store":
            // Nothing listens on port 1: the server counts as down, and loads go on without it.
            return .object([("conninfo", .string("host=127.0.0.1 port=1 dbname=check")), ("connect_timeout_ms", .int(1_000))])
        case "delay":
            // The example's 100 ms a call made thread-safe's 500 calls outlast the check.
            return .object([("delay_ms", .int(1))])
        default:
            return .object([])
        }
    }

    /// Configs a plugin must refuse cleanly or accept: unknown keys, and each known key (those of
    /// the valid config, and common ones) with a value of the wrong type.
    static func invalidConfigs(valid: JSONValue) -> [JSONValue] {
        var configs: [JSONValue] = [
            .object([("__invalid__", .array([.int(1), .int(2)]))]),
            .object([("path", .int(1)), ("url", .array([])), ("level", .int(3)), ("label", .object([])),
                     ("ttl_seconds", .string("soon")), ("max_entries", .int(-5)), ("namespace", .null),
                     ("timeout_ms", .double(-1.5)), ("default_page_size", .int(0))]),
        ]
        guard case .object(let members) = valid else { return configs }
        for (index, member) in members.enumerated() {
            var wrong = members
            wrong[index].value = wrongTyped(member.value)
            configs.append(.object(wrong))
        }
        if !members.isEmpty { configs.append(.object(members.map { (key: $0.key, value: wrongTyped($0.value)) })) }
        return configs
    }

    private static func wrongTyped(_ value: JSONValue) -> JSONValue {
        switch value {
        case .string: .int(12_345)
        case .int, .double, .number: .string("not a number")
        case .bool: .string("yes")
        case .null: .array([.null])
        case .array, .object: .int(7)
        }
    }
}
