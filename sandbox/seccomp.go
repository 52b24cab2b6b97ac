package sandbox

import (
	"encoding/binary"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// The seccomp filter closes what the namespaces leave open to a process
// inside the sandbox: making namespaces of its own (a nested user
// namespace gives it root's capabilities over new mounts and network
// devices, the kernel's largest attack surface), mounting, tracing other
// processes or reading their memory, the kernel keyrings (shared across
// the host's namespaces), and loading kernel code. Each such call fails
// with EPERM, as a kernel without the feature would answer; programs
// handle that. It is a classic BPF program that bubblewrap installs right
// before it starts the shell (--seccomp FD).

// deniedSyscalls fail with EPERM inside the sandbox.
var deniedSyscalls = []struct {
	name string
	nr   uintptr
}{
	{"unshare", unix.SYS_UNSHARE},
	{"setns", unix.SYS_SETNS},
	{"mount", unix.SYS_MOUNT},
	{"umount2", unix.SYS_UMOUNT2},
	{"pivot_root", unix.SYS_PIVOT_ROOT},
	{"open_tree", unix.SYS_OPEN_TREE},
	{"move_mount", unix.SYS_MOVE_MOUNT},
	{"fsopen", unix.SYS_FSOPEN},
	{"fsconfig", unix.SYS_FSCONFIG},
	{"fsmount", unix.SYS_FSMOUNT},
	{"fspick", unix.SYS_FSPICK},
	{"mount_setattr", unix.SYS_MOUNT_SETATTR},
	{"ptrace", unix.SYS_PTRACE},
	{"process_vm_readv", unix.SYS_PROCESS_VM_READV},
	{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV},
	{"keyctl", unix.SYS_KEYCTL},
	{"add_key", unix.SYS_ADD_KEY},
	{"request_key", unix.SYS_REQUEST_KEY},
	{"init_module", unix.SYS_INIT_MODULE},
	{"finit_module", unix.SYS_FINIT_MODULE},
	{"delete_module", unix.SYS_DELETE_MODULE},
	{"kexec_load", unix.SYS_KEXEC_LOAD},
	{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD},
	{"bpf", unix.SYS_BPF},
	{"perf_event_open", unix.SYS_PERF_EVENT_OPEN},
	{"userfaultfd", unix.SYS_USERFAULTFD},
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT},
	{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT},
	{"swapon", unix.SYS_SWAPON},
	{"swapoff", unix.SYS_SWAPOFF},
	{"reboot", unix.SYS_REBOOT},
	{"acct", unix.SYS_ACCT},
	{"syslog", unix.SYS_SYSLOG},
}

// newNamespaces are clone's flags that make namespaces; a clone with any
// of them fails. clone3 passes its flags in memory a filter cannot read,
// so it fails with ENOSYS, and the C library falls back to clone.
const newNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWCGROUP

// auditArch is the architecture the filter is built for: the syscall
// numbers above are this build's, so a call made through another ABI (a
// 32-bit one on a 64-bit kernel) is refused whole.
var auditArch = map[string]uint32{
	"amd64": unix.AUDIT_ARCH_X86_64,
	"arm64": unix.AUDIT_ARCH_AARCH64,
}

// x32Bit marks x86_64's x32 ABI: the same numbers with this bit set.
const x32Bit = 0x40000000

// Classic BPF as the kernel's seccomp reads it.
const (
	bpfLdWAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgeK    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfJsetK   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfRetK    = unix.BPF_RET | unix.BPF_K
	offNr      = 0  // seccomp_data.nr
	offArch    = 4  // seccomp_data.arch
	offArg0Low = 16 // the low half of seccomp_data.args[0] (little-endian)
)

// SeccompProgram is the filter for this architecture, as the bytes of a
// struct sock_filter array (bwrap --seccomp reads them from a file
// descriptor). An architecture without a filter here is an error.
func SeccompProgram() ([]byte, error) {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("no seccomp filter for %s (only amd64 and arm64)", runtime.GOARCH)
	}
	var p []unix.SockFilter
	emit := func(code uint16, jt, jf uint8, k uint32) {
		p = append(p, unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k})
	}
	// The program: check the arch, load the number, refuse x32 (amd64),
	// the denials, clone (3 instructions), clone3 (2), then allow and deny.
	// last is deny's index; a jump's offset counts from the next one.
	x32 := runtime.GOARCH == "amd64"
	last := 2 + 1 + len(deniedSyscalls) + 3 + 2 + 1
	if x32 {
		last++
	}
	toDeny := func() uint8 { return uint8(last - len(p) - 1) }
	emit(bpfLdWAbs, 0, 0, offArch)
	emit(bpfJeqK, 0, toDeny(), arch)
	emit(bpfLdWAbs, 0, 0, offNr)
	if x32 {
		emit(bpfJgeK, toDeny(), 0, x32Bit)
	}
	for _, s := range deniedSyscalls {
		emit(bpfJeqK, toDeny(), 0, uint32(s.nr))
	}
	emit(bpfJeqK, 0, 2, unix.SYS_CLONE)
	emit(bpfLdWAbs, 0, 0, offArg0Low)
	emit(bpfJsetK, toDeny(), toDeny()-1, newNamespaces)
	emit(bpfJeqK, 0, 1, unix.SYS_CLONE3)
	emit(bpfRetK, 0, 0, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	emit(bpfRetK, 0, 0, unix.SECCOMP_RET_ALLOW)
	emit(bpfRetK, 0, 0, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	if len(p) != last+1 || last > 255 {
		panic(fmt.Sprintf("seccomp program is %d instructions, want %d (at most 256)", len(p), last+1))
	}
	out := make([]byte, 0, 8*len(p))
	for _, f := range p {
		out = binary.LittleEndian.AppendUint16(out, f.Code)
		out = append(out, f.Jt, f.Jf)
		out = binary.LittleEndian.AppendUint32(out, f.K)
	}
	return out, nil
}
