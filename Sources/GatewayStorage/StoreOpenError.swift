import Foundation
import GRDB

/// Why a store file could not be opened, worded for the operator who set
/// `storage.sqlite.path`: Foundation's and SQLite's own texts ("A file with the same name
/// already exists", "unable to open database file") name neither the key nor the fix.
public struct StoreOpenError: Error, CustomStringConvertible {
    public let path: String
    public let reason: String

    public var description: String { "cannot use the store at \(path) (storage.sqlite.path): \(reason)" }

    /// The reason a path cannot hold a store, found before SQLite tries, or nil when the
    /// path looks usable and SQLite's own answer is the best there is.
    static func problem(with path: String) -> String? {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder), isFolder.boolValue {
            return "it is a folder; name a file in it, such as \(url.appendingPathComponent("gateway.sqlite").path)"
        }
        var folder = url.deletingLastPathComponent()
        // The nearest part of the path that exists must be a folder the gateway may write in.
        while !FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder) {
            let parent = folder.deletingLastPathComponent()
            if parent.path == folder.path { return nil }
            folder = parent
        }
        if !isFolder.boolValue { return "\(folder.path) is a file, not a folder" }
        if !FileManager.default.isWritableFile(atPath: folder.path) {
            return "the folder \(folder.path) is not writable by this user"
        }
        return nil
    }

    /// A failure to read or write a store that opened (a damaged page, a full disk), named
    /// as an opening failure is; nil for an error that is not SQLite's.
    public static func using(_ path: String, _ error: any Error) -> StoreOpenError? {
        guard error is DatabaseError else { return nil }
        return StoreOpenError(path: path, reason: CommitHealth.describe(error) + fullDisk(path))
    }

    /// What SQLite says of a full disk depends on where it noticed (`SQLITE_FULL`, or a
    /// `disk I/O error` when its `-shm` could not grow): the folder's free space says it.
    static func fullDisk(_ path: String) -> String {
        var info = statvfs()
        let folder = URL(fileURLWithPath: path).standardizedFileURL.deletingLastPathComponent().path
        guard statvfs(folder, &info) == 0 else { return "" }
        let free = UInt64(info.f_bavail) * UInt64(info.f_frsize)
        // Less than a store's page cache and log need to open and upgrade: full, for SQLite.
        guard free < 1 << 20 else { return "" }
        return "; the disk holding it is full (\(free / 1024) KiB free): make room, then start again"
    }

    /// Runs `open`, turning its failure into one that names the path and the likely cause.
    static func naming<T>(_ path: String, _ open: () throws -> T) throws -> T {
        if let problem = problem(with: path) { throw StoreOpenError(path: path, reason: problem) }
        do {
            return try open()
        } catch let error as StoreOpenError {
            throw error
        } catch {
            throw StoreOpenError(path: path, reason: "\(error)" + fullDisk(path))
        }
    }
}
