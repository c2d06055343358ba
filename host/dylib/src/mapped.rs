//! Checking that the code the dynamic loader mapped is the bytes the host verified.
//!
//! Loading from the verified copy's own descriptor already rules out a swapped *name*; this
//! check looks at memory: every read-only loadable segment of the ELF file (code and constants,
//! which relocation never touches) must be, byte for byte, what the loader mapped for it. It
//! runs after `dlopen` and before any function of the library is called. Writable segments are
//! skipped (relocations change them), as are non-ELF64 files (another platform's format) — for
//! those only the descriptor-based load stands.

use std::ffi::c_void;

const PT_LOAD: u32 = 1;
const PF_W: u32 = 2;
const PF_R: u32 = 4;

/// One `PT_LOAD` program header: flags, file offset, virtual address, size in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    flags: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The loadable segments of a little-endian ELF64 file; `None` for anything else.
fn segments(bytes: &[u8]) -> Option<Vec<Segment>> {
    if bytes.get(..4)? != b"\x7fELF" || *bytes.get(4)? != 2 || *bytes.get(5)? != 1 {
        return None;
    }
    let phoff = usize::try_from(u64_at(bytes, 0x20)?).ok()?;
    let phentsize = usize::from(u16_at(bytes, 0x36)?);
    let phnum = usize::from(u16_at(bytes, 0x38)?);
    if phentsize < 56 {
        return None;
    }
    let mut out = Vec::new();
    for i in 0..phnum {
        let at = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(bytes, at)? == PT_LOAD {
            out.push(Segment {
                flags: u32_at(bytes, at + 4)?,
                offset: u64_at(bytes, at + 8)?,
                vaddr: u64_at(bytes, at + 16)?,
                filesz: u64_at(bytes, at + 32)?,
            });
        }
    }
    Some(out)
}

/// Checks the mapping of the object containing `symbol` against `bytes`.
#[cfg(all(
    target_os = "linux",
    target_pointer_width = "64",
    target_endian = "little"
))]
pub(crate) fn verify(symbol: *const c_void, bytes: &[u8]) -> Result<(), String> {
    let Some(segments) = segments(bytes) else {
        return Err("the verified file is not a little-endian ELF64 object".to_owned());
    };
    // SAFETY: `Dl_info` is plain data (pointers and integers); all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `dladdr` only reads the loader's tables and writes `info`; `symbol` is an address
    // inside an object this thread just loaded (and never unloads).
    let found = unsafe { libc::dladdr(symbol, &raw mut info) };
    if found == 0 || info.dli_fbase.is_null() {
        return Err("the loader does not say where it mapped the library".to_owned());
    }
    // SAFETY: `sysconf` has no memory effects.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let first = segments.iter().map(|s| s.vaddr).min().unwrap_or(0) & !(page - 1);
    // `dli_fbase` is where the lowest segment's page was mapped.
    let bias = (info.dli_fbase as u64).wrapping_sub(first);
    let mut checked = 0;
    for s in segments
        .iter()
        .filter(|s| s.flags & PF_W == 0 && s.flags & PF_R != 0)
    {
        let (Ok(start), Ok(len)) = (usize::try_from(s.offset), usize::try_from(s.filesz)) else {
            return Err("a segment does not fit in memory".to_owned());
        };
        let Some(expected) = start.checked_add(len).and_then(|end| bytes.get(start..end)) else {
            return Err(format!(
                "a loadable segment (offset {start:#x}) lies outside the file"
            ));
        };
        let address = bias.wrapping_add(s.vaddr) as usize as *const u8;
        // SAFETY: the loader mapped this readable, non-writable segment at `bias + vaddr` with
        // at least `filesz` bytes (ELF `PT_LOAD` semantics), and never unmaps it (the library
        // is never closed). Nobody writes it: it is mapped without write permission.
        let mapped = unsafe { std::slice::from_raw_parts(address, len) };
        if mapped != expected {
            return Err(format!(
                "the segment at file offset {start:#x} differs from the hashed bytes"
            ));
        }
        checked += 1;
    }
    if checked == 0 {
        return Err("the library has no read-only segment to check".to_owned());
    }
    Ok(())
}

/// Elsewhere only the descriptor-based load stands (see the module docs).
#[cfg(not(all(
    target_os = "linux",
    target_pointer_width = "64",
    target_endian = "little"
)))]
pub(crate) fn verify(_symbol: *const c_void, _bytes: &[u8]) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_elf_input_has_no_segments() {
        assert_eq!(segments(b"not an elf"), None);
        assert_eq!(segments(b"\x7fELF\x01\x01"), None, "32-bit");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_test_binary_has_read_only_loadable_segments() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let segs = segments(&exe).unwrap();
        assert!(segs.iter().any(|s| s.flags & PF_W == 0), "{segs:?}");
    }
}
