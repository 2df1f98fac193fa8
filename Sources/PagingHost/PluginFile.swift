import FoundationEssentials
import Glibc

/// A plugin library file, opened once: whatever the loader checks, hashes or copies of it is
/// read through this one descriptor, so a file swapped at the path meanwhile is not mixed in.
final class PluginFile {
    let path: String
    let fd: Int32
    /// The file's identity when it was opened.
    let identity: PluginLibrary.FileIdentity

    /// Opens `path` for reading without blocking (a FIFO with no writer would block a plain
    /// open) and refuses anything but a regular file.
    init(path: String) throws(PluginLoadError) {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { throw PluginLibrary.fileError(path, errno) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            close(fd)
            throw PluginLibrary.fileError(path, code)
        }
        do {
            try PluginLibrary.checkType(info, path: path)
        } catch {
            close(fd)
            throw error
        }
        self.path = path
        self.fd = fd
        identity = PluginLibrary.FileIdentity(info)
    }

    deinit { close(fd) }

    /// Refuses a file that does not start with the ELF magic number.
    func checkELFHeader() throws(PluginLoadError) {
        try Self.checkELFHeader(fd, path: path)
    }

    /// The SHA-256 of the whole file.
    func sha256() throws(PluginLoadError) -> String {
        var hasher = SHA256.Hasher256()
        try readAll { hasher.update($0) }
        return hexString(hasher.finalize())
    }

    /// A sealed memfd (no write, no resize, no further seals) holding a copy of the file, and
    /// the SHA-256 of exactly the bytes copied. The caller owns the descriptor.
    func sealedCopy() throws(PluginLoadError) -> (fd: Int32, sha256: String) {
        let memfd = try Memfd.create(name: URL(fileURLWithPath: path).lastPathComponent, path: path)
        do throws(PluginLoadError) {
            var hasher = SHA256.Hasher256()
            try readAll { (chunk: UnsafeBufferPointer<UInt8>) throws(PluginLoadError) in
                hasher.update(chunk)
                if let failed = writeAll(memfd, UnsafeRawBufferPointer(chunk)) {
                    throw Memfd.failure(path, "writing the in-memory copy", failed)
                }
            }
            guard fcntl(memfd, Memfd.addSeals, Memfd.allSeals) == 0 else {
                throw Memfd.failure(path, "sealing the in-memory copy", errno)
            }
            try Self.checkELFHeader(memfd, path: path)
            return (memfd, hexString(hasher.finalize()))
        } catch {
            close(memfd)
            throw error
        }
    }

    /// Reads the file from its start to its end, a chunk at a time.
    private func readAll(_ body: (UnsafeBufferPointer<UInt8>) throws(PluginLoadError) -> Void) throws(PluginLoadError) {
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 1 << 20)
        defer { buffer.deallocate() }
        var offset: off_t = 0
        while true {
            let count = pread(fd, buffer.baseAddress, buffer.count, offset)
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw .unreadable(path: path, reason: String(cString: strerror(errno))) }
            if count == 0 { return }
            try body(UnsafeBufferPointer(rebasing: buffer[..<count]))
            offset += off_t(count)
        }
    }

    private static func checkELFHeader(_ fd: Int32, path: String) throws(PluginLoadError) {
        var header = [UInt8](repeating: 0, count: 20)
        var count: Int
        repeat { count = pread(fd, &header, header.count, 0) } while count < 0 && errno == EINTR
        guard count >= 0 else { throw .unreadable(path: path, reason: String(cString: strerror(errno))) }
        guard count >= 4, header[0..<4] == [0x7F, 0x45, 0x4C, 0x46] else {
            throw .notASharedObject(path: path, reason: count < 4 ? "the file is too short" : "no ELF header")
        }
        // e_machine, for a 64-bit little-endian ELF file (dlopen says only "cannot open shared
        // object file: No such file or directory" of a library for another processor).
        guard count == 20, header[4] == 2, header[5] == 1 else { return }
        let machine = UInt16(header[18]) | UInt16(header[19]) << 8
        if let host = ELFMachine.host, machine != host {
            throw .notASharedObject(path: path, reason: "built for \(ELFMachine.name(machine)), this host is \(ELFMachine.name(host))")
        }
        if let problem = ELFLayout.problem(fd: fd) { throw .notASharedObject(path: path, reason: problem) }
    }
}

/// ELF's e_machine values of the processors a library may be built for.
enum ELFMachine {
    #if arch(x86_64)
    static let host: UInt16? = 62
    #elseif arch(arm64)
    static let host: UInt16? = 183
    #else
    static let host: UInt16? = nil
    #endif

    static func name(_ machine: UInt16) -> String {
        switch machine {
        case 3: "x86 (32-bit)"
        case 40: "ARM (32-bit)"
        case 62: "x86-64"
        case 183: "AArch64 (ARM 64-bit)"
        case 243: "RISC-V"
        case 21: "PowerPC 64"
        case 22: "IBM S/390"
        case 8: "MIPS"
        default: "ELF machine \(machine)"
        }
    }
}

/// memfd_create(2) and file seals, which the Glibc module does not declare (they need
/// `_GNU_SOURCE`): the function is looked up in the C library, and the constants are the
/// kernel's ABI values (`<linux/memfd.h>`, `<bits/fcntl-linux.h>`).
enum Memfd {
    private typealias Create = @convention(c) (UnsafePointer<CChar>, UInt32) -> Int32

    private static let cloexec: UInt32 = 0x0001        // MFD_CLOEXEC
    private static let allowSealing: UInt32 = 0x0002   // MFD_ALLOW_SEALING
    private static let noExecSeal: UInt32 = 0x0008     // MFD_NOEXEC_SEAL (Linux 6.3)
    static let addSeals: Int32 = 1033                  // F_ADD_SEALS
    static let getSeals: Int32 = 1034                  // F_GET_SEALS
    /// F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE.
    static let allSeals: Int32 = 0x0001 | 0x0002 | 0x0004 | 0x0008

    /// A new memfd that can be sealed, closed on exec; `name` shows in /proc/self/maps as
    /// `/memfd:<name> (deleted)`.
    static func create(name: String, path: String) throws(PluginLoadError) -> Int32 {
        guard let symbol = dlsym(nil, "memfd_create") else {
            throw .loadFailed(path: path, reason: "this C library has no memfd_create, needed to load a checked copy")
        }
        let create = unsafeBitCast(symbol, to: Create.self)
        let name = String(decoding: name.utf8.prefix(200), as: UTF8.self)
        var fd = create(name, cloexec | allowSealing)
        if fd < 0, errno == EACCES {
            // vm.memfd_noexec = 2 refuses memfds that could be executed; mapping the library
            // (unlike exec) is still allowed in one sealed against exec.
            fd = create(name, cloexec | allowSealing | noExecSeal)
        }
        guard fd >= 0 else { throw failure(path, "memfd_create", errno) }
        return fd
    }

    static func failure(_ path: String, _ what: String, _ code: Int32) -> PluginLoadError {
        .loadFailed(path: path, reason: "\(what): \(String(cString: strerror(code)))")
    }
}
