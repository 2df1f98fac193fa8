import Glibc

/// The layout a 64-bit little-endian shared object's headers describe, checked against the
/// file before the dynamic loader maps it: a library cut short (half copied, half downloaded)
/// or with damaged headers made ld.so itself crash the process (SIGBUS reading past the end of
/// the file, SIGSEGV following a wild address), where `pager run` should say what is wrong.
/// The checks are the loader's own assumptions: every segment's bytes lie within the file,
/// every loadable one is aligned as it says, and the dynamic section and the tables it points to
/// lie within the loaded segments.
struct ELFLayout {
    private struct Segment {
        let type: UInt32
        let offset, virtualAddress, fileSize, memorySize, alignment: UInt64
    }

    private let fd: Int32
    private let fileSize: UInt64

    /// Checks the file open at `fd` (a 64-bit little-endian ELF file); the reason it cannot be
    /// loaded, or nil.
    static func problem(fd: Int32) -> String? {
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
        let loaded = segments.filter { $0.type == 1 } // PT_LOAD
        guard !loaded.isEmpty else { return "\(truncated): it has no loadable segment" }
        for segment in segments where segment.type != 0 && segment.type != 0x6474_E551 { // PT_NULL, PT_GNU_STACK
            guard within(segment.offset, segment.fileSize) else {
                return "\(truncated): a segment's \(segment.fileSize) bytes at offset \(segment.offset) lie outside it"
            }
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
        guard mapped(dynamic.virtualAddress, max(dynamic.memorySize, 1)), dynamic.fileSize <= 1 << 20,
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
        return nil
    }
}

private extension [UInt8] {
    func u16(_ at: Int) -> UInt16 { UInt16(self[at]) | UInt16(self[at + 1]) << 8 }
    func u32(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(self[at + $1]) << (8 * $1) } }
    func u64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(self[at + $1]) << (8 * $1) } }
}
