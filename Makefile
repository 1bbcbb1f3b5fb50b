# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
#
# kevd: out-of-tree build against KDIR, and the test targets.
#   make                  build kevd.ko (and, where CONFIG_KUNIT is on, the tests)
#   make install          modules_install + depmod
#   make check            the one test command (both test kernels, static checks)
#   make check-uml        UML kernel only       make check-smp   x86_64 QEMU only
#   make run              boot the SMP kernel and show kevd at work

KDIR ?= /lib/modules/$(shell uname -r)/build
HARNESS := $(CURDIR)/tools/testing/kevd-test

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

install:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules_install
	depmod -a $(shell $(MAKE) -s -C $(KDIR) kernelrelease 2>/dev/null)

clean:
	@if [ -d $(KDIR) ]; then $(MAKE) -C $(KDIR) M=$(CURDIR) clean; fi
	rm -rf .build

check:
	$(HARNESS) check smp uml

check-uml:
	$(HARNESS) check uml

check-smp:
	$(HARNESS) check smp

run:
	$(HARNESS) run

# The benchmark (issue 6): table, CSV, kevd-bench lines; on uml-nodebug
# (UML without debug options: the CPU cost reference), smp and uml.
bench:
	$(HARNESS) bench

.PHONY: all modules install clean check check-uml check-smp run bench
