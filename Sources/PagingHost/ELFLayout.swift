import Glibc

/// The layout a 64-bit little-endian shared object's headers describe, checked against the
/// file before the dynamic loader maps it: a library cut short (half copied, half downloaded)
/// or with damaged headers made ld.so itself crash the process (SIGBUS reading past the end of
/// the file, SIGSEGV following a wild address), where `pager run` should say what is wrong.
/// The checks are the loader's own assumptions: every segment's bytes lie within the file,
/// every loadable one is aligned as it says, and the dynamic section and the tables it points to
/// lie within the loaded segments.
package struct ELFLayout {
    private struct Segment {
        let type: UInt32
        let offset, virtualAddress, fileSize, memorySize, alignment: UInt64
    }

    private let fd: Int32
    private let fileSize: UInt64

    /// Checks the file open at `fd` (a 64-bit little-endian ELF file); the reason it cannot be
    /// loaded, or nil.
    package static func problem(fd: Int32) -> String? {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        return ELFLayout(fd: fd, fileSize: UInt64(info.st_size)).problem()
    }

    /// `count` bytes at `offset`, when the file holds them.
    private func bytes(at offset: UInt64, count: UInt64) -> [UInt8]? {
        guard within(offset, count) else { return nil }
        var buffer = [UInt8](repeating: 0, count: Int(count))
        var read: Int
        repeat { read = pread(fd, &buffer, buffer.count, off_t(offset)) } while read < 0 && errno == EINTR
        return read == buffer.count ? buffer : nil
    }

    /// Whether [offset, offset + count) lies within the file.
    private func within(_ offset: UInt64, _ count: UInt64) -> Bool {
        offset <= fileSize && count <= fileSize - offset
    }

    private func problem() -> String? {
        let truncated = "the file is cut short or damaged (\(fileSize) bytes)"
        guard let header = bytes(at: 0, count: 64) else { return truncated }
        guard header.u16(16) == 3 else { return "its ELF type is \(header.u16(16)), not a shared object's (3)" }
        let headersAt = header.u64(32), entrySize = UInt64(header.u16(54)), count = UInt64(header.u16(56))
        guard entrySize == 56, count > 0, count < 0xFFFF, let table = bytes(at: headersAt, count: entrySize * count) else {
            return "\(truncated): its program headers lie outside it"
        }
        let segments = (0..<Int(count)).map { index in
            let at = index * 56
            return Segment(type: table.u32(at), offset: table.u64(at + 8), virtualAddress: table.u64(at + 16),
                           fileSize: table.u64(at + 32), memorySize: table.u64(at + 40), alignment: table.u64(at + 48))
        }
        // Past 2^48 nothing maps (x86-64 and AArch64 user space): bounded so, no sum below overflows.
        let limit: UInt64 = 1 << 48
        guard segments.allSatisfy({ [$0.offset, $0.virtualAddress, $0.fileSize, $0.memorySize, $0.alignment].allSatisfy { $0 < limit } }) else {
            return "\(truncated): a segment's sizes or addresses are impossible"
        }
        let loaded = segments.filter { $0.type == 1 } // PT_LOAD
        guard !loaded.isEmpty else { return "\(truncated): it has no loadable segment" }
        for segment in segments where segment.type != 0 && segment.type != 0x6474_E551 { // PT_NULL, PT_GNU_STACK
            guard within(segment.offset, segment.fileSize) else {
                return "\(truncated): a segment's \(segment.fileSize) bytes at offset \(segment.offset) lie outside it"
            }
        }
        // Laid out as linkers lay them out and the loader assumes: the first maps the file's
        // start (its headers), and each begins past the end of the one before.
        guard loaded[0].offset == 0, zip(loaded, loaded.dropFirst()).allSatisfy({ $0.virtualAddress + $0.memorySize <= $1.virtualAddress }) else {
            return "\(truncated): its loadable segments are out of order"
        }
        for segment in loaded {
            let alignment = segment.alignment
            guard segment.fileSize <= segment.memorySize, segment.memorySize < 1 << 40,
                  alignment <= 1 || (alignment & (alignment - 1) == 0 && segment.offset % alignment == segment.virtualAddress % alignment) else {
                return "\(truncated): a loadable segment's sizes or alignment are impossible"
            }
        }
        guard let dynamic = segments.first(where: { $0.type == 2 }) else { return nil } // PT_DYNAMIC
        // Addresses the dynamic section gives must fall within what is loaded.
        func mapped(_ address: UInt64, _ length: UInt64 = 1) -> Bool {
            loaded.contains { address >= $0.virtualAddress && length <= $0.memorySize && address - $0.virtualAddress <= $0.memorySize - length }
        }
        // Within a loaded segment, at the same place in the file as in memory.
        guard loaded.contains(where: { dynamic.virtualAddress >= $0.virtualAddress && dynamic.offset >= $0.offset
                                        && dynamic.virtualAddress - $0.virtualAddress == dynamic.offset - $0.offset }),
              mapped(dynamic.virtualAddress, max(dynamic.memorySize, 1)), dynamic.fileSize <= 1 << 20,
              let entries = bytes(at: dynamic.offset, count: dynamic.fileSize - dynamic.fileSize % 16) else {
            return "\(truncated): its dynamic section lies outside what is loaded"
        }
        var tags: [UInt64: UInt64] = [:]
        for at in stride(from: 0, to: entries.count, by: 16) {
            let tag = entries.u64(at)
            if tag == 0 { break } // DT_NULL
            tags[tag] = entries.u64(at + 8)
        }
        // DT_STRTAB/DT_STRSZ, DT_SYMTAB, DT_HASH, DT_GNU_HASH, DT_RELA/DT_RELASZ, DT_JMPREL/DT_PLTRELSZ.
        let ranges: [(address: UInt64?, length: UInt64)] = [
            (tags[5], tags[10] ?? 1), (tags[6], 24), (tags[4], 8), (tags[0x6FFF_FEF5], 16),
            (tags[7], tags[8] ?? 1), (tags[23], tags[2] ?? 1),
        ]
        for (address, length) in ranges {
            if let address, !mapped(address, max(length, 1)) {
                return "\(truncated): its dynamic section points outside what is loaded"
            }
        }
        // The symbols' names must lie within the string table, which ends its last name: the
        // loader compares names while it binds, and a damaged offset sent it through a wild
        // address. (The file's bytes at an address: where a loadable segment maps it.)
        func fileBytes(at address: UInt64, count: UInt64) -> [UInt8]? {
            guard let segment = loaded.first(where: { address >= $0.virtualAddress && address - $0.virtualAddress < $0.fileSize }),
                  count <= segment.fileSize - (address - segment.virtualAddress) else { return nil }
            return bytes(at: segment.offset + (address - segment.virtualAddress), count: count)
        }
        guard let symbolsAt = tags[6], let stringsAt = tags[5], let stringsSize = tags[10], stringsSize > 0 else { return nil }
        guard fileBytes(at: stringsAt + stringsSize - 1, count: 1) == [0] else { return "\(truncated): its string table is cut" }
        guard let count = symbolCount(tags, fileBytes), count <= 1 << 20, let symbols = fileBytes(at: symbolsAt, count: count * 24) else {
            return "\(truncated): its symbol table lies outside what is loaded"
        }
        // And a defined symbol's address within what is loaded (a thread-local one's within the
        // thread-local block).
        let threadLocalSize = segments.first { $0.type == 7 }?.memorySize ?? 0 // PT_TLS
        for index in 0..<Int(count) {
            let at = index * 24, section = symbols.u16(at + 6), value = symbols.u64(at + 8)
            guard UInt64(symbols.u32(at)) < stringsSize else { return "\(truncated): symbol \(index)'s name lies outside its string table" }
            guard section != 0, section != 0xFFF1 else { continue } // undefined, absolute
            guard symbols[at + 4] & 0xF == 6 ? value <= threadLocalSize : mapped(value, 0) else {
                return "\(truncated): symbol \(index)'s address lies outside what is loaded"
            }
        }
        if let versions = tags[0x6FFF_FFF0], !mapped(versions, count * 2) { // DT_VERSYM
            return "\(truncated): its symbol versions lie outside what is loaded"
        }
        return nil
    }

    /// The number of dynamic symbols, from the GNU hash table (the last symbol of its highest
    /// bucket's chain) or the System V one (its chain count); nil when neither can be read.
    private func symbolCount(_ tags: [UInt64: UInt64], _ fileBytes: (UInt64, UInt64) -> [UInt8]?) -> UInt64? {
        if let hash = tags[0x6FFF_FEF5] { // DT_GNU_HASH
            guard let header = fileBytes(hash, 16) else { return nil }
            let bucketCount = UInt64(header.u32(0)), first = UInt64(header.u32(4)), bloomWords = UInt64(header.u32(8))
            let bucketsAt = hash + 16 + bloomWords * 8 // `hash` is mapped: below 2^49
            guard bucketCount > 0, let buckets = fileBytes(bucketsAt, bucketCount * 4) else { return nil }
            let highest = UInt64((0..<Int(bucketCount)).map { buckets.u32($0 * 4) }.max() ?? 0)
            guard highest >= first else { return first }
            // Each chain ends at an entry whose lowest bit is set.
            let chainsAt = bucketsAt + bucketCount * 4
            var index = highest
            while index < 1 << 20 {
                guard let chunk = fileBytes(chainsAt + (index - first) * 4, 256) ?? fileBytes(chainsAt + (index - first) * 4, 4) else { return nil }
                for at in stride(from: 0, to: chunk.count, by: 4) {
                    if chunk.u32(at) & 1 == 1 { return index + 1 }
                    index += 1
                }
            }
            return nil
        }
        if let hash = tags[4], let header = fileBytes(hash, 8) { return UInt64(header.u32(4)) } // DT_HASH: nchain
        return nil
    }
}

private extension [UInt8] {
    func u16(_ at: Int) -> UInt16 { UInt16(self[at]) | UInt16(self[at + 1]) << 8 }
    func u32(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(self[at + $1]) << (8 * $1) } }
    func u64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(self[at + $1]) << (8 * $1) } }
}
