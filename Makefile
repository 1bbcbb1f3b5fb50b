# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
#
# kevd: out-of-tree build against KDIR, and the test targets.
#   make                  build kevd.ko alone (the product)
#   make tests            + the fake HCA and the KUnit module (needs KUnit)
#   make samples          + the sample consumers (samples/)
#   make all-modules      everything: product, tests, samples, benchmark
#   make install          install kevd.ko, its header and Module.symvers
#   make check            the one test command (both test kernels, static checks)
#   make check-uml        UML kernel only       make check-smp   x86_64 QEMU only
#   make run              boot the SMP kernel and show kevd at work
#   make bench            the benchmark on the kernels without debug options
#
# install puts, under INSTALL_MOD_PATH (default /):
#   lib/modules/<release>/updates/kevd.ko        (then depmod for <release>)
#   usr/share/kevd/include/kevd/kevd.h           the public API
#   usr/share/kevd/<release>/Module.symvers      kevd's exported symbols
# <release> is KDIR's own, not uname -r: UTS_RELEASE of its utsrelease.h,
# the release modules_install and the module's vermagic use (Debian's 6.1
# headers say 6.1.192 in include/config/kernel.release, for 6.1.0-57-amd64).
# kevd.ko is signed only when KDIR has its signing key (distribution
# headers have none: sign it with your own key, as DKMS does with its MOK).
# A consumer module builds against them with, in its Kbuild:
#   ccflags-y += -I/usr/share/kevd/include
#   KBUILD_EXTRA_SYMBOLS := /usr/share/kevd/<release>/Module.symvers

KDIR ?= /lib/modules/$(shell uname -r)/build
HARNESS := $(CURDIR)/tools/testing/kevd-test
KREL = $(shell sed -n 's/^\#define UTS_RELEASE "\(.*\)"$$/\1/p' \
	$(KDIR)/include/generated/utsrelease.h 2>/dev/null)
KEVD_SHARE = $(INSTALL_MOD_PATH)/usr/share/kevd

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

tests samples:
	$(MAKE) -C $(KDIR) M=$(CURDIR) KEVD_MODULES=$@ modules

all-modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) KEVD_MODULES=all modules

install: modules
	@test -n "$(KREL)" || { echo "no UTS_RELEASE in $(KDIR)/include/generated/utsrelease.h: is KDIR a configured kernel tree?" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) INSTALL_MOD_DIR=updates \
		$(if $(wildcard $(KDIR)/certs/signing_key.pem),,CONFIG_MODULE_SIG_ALL=) \
		modules_install
	depmod $(if $(INSTALL_MOD_PATH),-b $(INSTALL_MOD_PATH)) $(KREL)
	install -D -m 644 include/kevd/kevd.h $(KEVD_SHARE)/include/kevd/kevd.h
	install -D -m 644 Module.symvers $(KEVD_SHARE)/$(KREL)/Module.symvers

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

bench:
	$(HARNESS) bench

# Not part of check: SOAK_MINUTES (default 30) on both test kernels.
SOAK_MINUTES ?= 30
soak:
	$(HARNESS) soak $(SOAK_MINUTES)

.PHONY: all modules tests samples all-modules install clean check check-uml check-smp run bench soak
