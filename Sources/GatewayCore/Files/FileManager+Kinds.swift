import Foundation

extension FileManager {
    /// Whether `path` names a folder (following a link to one).
    public func isFolder(atPath path: String) -> Bool {
        var folder: ObjCBool = false
        return fileExists(atPath: path, isDirectory: &folder) && folder.boolValue
    }

    /// Whether `path` names a file that is not a folder: a folder opens like a file and
    /// fails only at its first read.
    public func isFile(atPath path: String) -> Bool {
        var folder: ObjCBool = false
        return fileExists(atPath: path, isDirectory: &folder) && !folder.boolValue
    }
}
