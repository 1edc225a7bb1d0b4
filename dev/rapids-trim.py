#!/usr/bin/env python3
"""Cuts the RAPIDS Accelerator jar down to what one Spark version on one GPU architecture loads.

    dev/rapids-trim.py RAPIDS_JAR SHIM SM OUT_DIR     e.g. ... rapids-4-spark_2.13-26.08.1.jar spark420 90 out

The jar holds classes for about twenty Spark versions (one folder per shim, beside the shared
classes) and cudf's native library with machine code for many GPUs; about 1 GB in all. This
writes:

  OUT_DIR/rapids.jar        the root classes, spark-shared/ and SHIM/ only (entries stored,
                            not deflated, so a later xz packs them well), without libcudf.so and
                            the optional GPUDirect Storage and profiler libraries
  OUT_DIR/natives/          libcudf.so with only sm_SM machine code (dev/fatbin-keep.py), and
                            libcudfjni.so and libnvmljni.so: point cudf at it with
                            -Dai.rapids.cudf.lib-native-dir=OUT_DIR/natives

Run `strip --strip-all OUT_DIR/natives/libcudf.so` afterwards.
"""
import os
import re
import shutil
import subprocess
import sys
import zipfile

NATIVES = "amd64/Linux/"
DROPPED = {NATIVES + "libcudf.so", NATIVES + "libcufilejni.so", NATIVES + "libprofilerjni.so"}
COPIED = ("libcudf.so", "libcudfjni.so", "libnvmljni.so")
SHIM_DIR = re.compile(r"^(spark\d{3}[a-z0-9]*)/")


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    src, shim, sm, out = sys.argv[1:]
    natives = os.path.join(out, "natives")
    os.makedirs(natives, exist_ok=True)
    shims, kept = set(), 0
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(os.path.join(out, "rapids.jar"), "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            name = info.filename
            m = SHIM_DIR.match(name)
            if m:
                shims.add(m.group(1))
                if m.group(1) != shim:
                    continue
            if name.startswith(NATIVES) and os.path.basename(name) in COPIED:
                with zin.open(info) as f, open(os.path.join(natives, os.path.basename(name)), "wb") as g:
                    shutil.copyfileobj(f, g, 1 << 24)
            if name in DROPPED:
                continue
            out_info = zipfile.ZipInfo(name, info.date_time)
            out_info.external_attr = info.external_attr
            zout.writestr(out_info, zin.read(info), zipfile.ZIP_STORED)
            kept += 1
    if shim not in shims:
        raise SystemExit(f"rapids-trim: {src} has no shim {shim}; it has {sorted(shims)}")
    for lib in COPIED:
        if not os.path.isfile(os.path.join(natives, lib)):
            raise SystemExit(f"rapids-trim: {src} has no {NATIVES}{lib}")
    print(f"rapids-trim: {kept} entries (shim {shim} of {len(shims)}) in {out}/rapids.jar")
    lib = os.path.join(natives, "libcudf.so")
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.check_call([sys.executable, os.path.join(here, "fatbin-keep.py"), lib, lib + ".kept", sm])
    os.replace(lib + ".kept", lib)


if __name__ == "__main__":
    main()
