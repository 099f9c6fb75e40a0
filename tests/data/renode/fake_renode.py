#!/usr/bin/env python3
"""A STAND-IN for Renode, for tests/test_renode.py where Renode is not
installed: it is not Renode and models nothing itself. It takes Renode's
command line (--disable-xwt --plain --port PORT SCRIPT.resc), reads the
script torchmcu.sim.renode wrote (LoadPlatformDescription, CreateFileBackend,
LoadELF, LoadBinary, VectorTableOffset, PerformanceInMips, start), runs the
ELF in QEMU on the machine FAKE_RENODE_QEMU_MACHINE names, with the io blob
where LoadBinary put it, writes the firmware's UART output to the file
backend as it comes, stops at the firmware's exit line, and answers the
monitor on PORT the way Renode's does (telnet negotiation, prompt, colours):
`cpu ExecutedInstructions` with the number FAKE_RENODE_INSTRUCTIONS gives,
`quit` by exiting."""

import os
import re
import socket
import subprocess
import sys

args = sys.argv[1:]
assert args[:2] == ["--disable-xwt", "--plain"] and args[2] == "--port", args
port, resc = int(args[3]), args[4]
text = open(resc).read()
need = ["mach create", "machine LoadPlatformDescription @", "CreateFileBackend @", "sysbus LoadELF @",
        "cpu VectorTableOffset 0x", "cpu PerformanceInMips ", "start"]
missing = [n for n in need if n not in text]
if missing:
    sys.exit(f"fake renode: the script lacks {missing}")
platform = re.search(r"LoadPlatformDescription @(\S+)", text).group(1)
if not os.path.isfile(platform):
    sys.exit(f"fake renode: no platform file {platform}")
uart_file = re.search(r"CreateFileBackend @(\S+) true", text).group(1)
elf = re.search(r"sysbus LoadELF @(\S+)", text).group(1)
io = re.search(r"sysbus LoadBinary @(\S+) (0x[0-9a-f]+)", text)

server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(1)

cmd = [os.environ.get("FAKE_RENODE_QEMU", "qemu-system-arm"), "-M", os.environ["FAKE_RENODE_QEMU_MACHINE"],
       "-display", "none", "-monitor", "none", "-serial", "stdio", "-semihosting-config", "enable=on,target=native",
       "-kernel", elf]
if io:
    cmd += ["-device", f"loader,file={io.group(1)},addr={io.group(2)},force-raw=on"]
qemu = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
with open(uart_file, "wb") as out:
    for line in qemu.stdout:
        out.write(line)
        out.flush()
        if line.startswith(b"tmcu: exit status="):
            break
qemu.kill()

conn, _ = server.accept()
prompt = b"\x1b[0m(torchmcu) "
conn.sendall(b"\xff\xfb\x01\xff\xfb\x03Renode, version 1.15.3\r\n" + prompt)
buf = b""
while True:
    chunk = conn.recv(1024)
    if not chunk:
        break
    buf += chunk
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        line = line.strip()
        conn.sendall(line + b"\r\n")  # the echo
        if line == b"quit":
            conn.close()
            sys.exit(0)
        if line == b"cpu ExecutedInstructions":
            conn.sendall(b"\x1b[32m" + os.environ.get("FAKE_RENODE_INSTRUCTIONS", "0").encode() + b"\x1b[0m\r\n")
        conn.sendall(prompt)
