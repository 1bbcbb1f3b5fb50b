// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Print the host's user xstate size as ptrace reports it (what UML's
 * PTRACE_GETREGSET NT_X86_XSTATE sees, tools/testing/patches/um/) and as
 * CPUID leaf 0xD reports it for the features enabled in XCR0:
 *
 *   xstate=2432 cpuid=2432 xcr0=0xe7
 *
 * The harness prints it in its first lines: a host-specific failure of the
 * UML kernel shows its cause there.
 */
#include <cpuid.h>
#include <elf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif

static long ptrace_xstate_size(void)
{
	const size_t len = 2 << 20;
	struct iovec iov;
	long size = -1;
	void *buf;
	pid_t pid;

	buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return -1;
	pid = fork();
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		raise(SIGSTOP);
		_exit(0);
	}
	if (pid > 0 && waitpid(pid, NULL, 0) == pid) {
		iov.iov_base = buf;
		iov.iov_len = len;
		if (ptrace(PTRACE_GETREGSET, pid, (void *)NT_X86_XSTATE, &iov) == 0)
			size = (long)iov.iov_len;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	munmap(buf, len);
	return size;
}

int main(void)
{
	unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
	unsigned long long xcr0 = 0;

	__cpuid(1, eax, ebx, ecx, edx);
	if (ecx & bit_OSXSAVE) {
		unsigned int lo, hi;

		__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
		xcr0 = ((unsigned long long)hi << 32) | lo;
		__cpuid_count(0xd, 0, eax, ebx, ecx, edx);
	} else {
		ebx = 0;
	}
	printf("xstate=%ld cpuid=%u xcr0=%#llx\n", ptrace_xstate_size(), ebx,
	       xcr0);
	return 0;
}
