import Foundation

/// The bytes of the file at `path`, a symbolic link's target's rather than the link's own
/// (a link's few bytes made a progress bar run past its end); nil when it cannot be read.
func fileSize(_ path: String) -> Int? {
    let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    return (try? FileManager.default.attributesOfItem(atPath: target))?[.size] as? Int
}
