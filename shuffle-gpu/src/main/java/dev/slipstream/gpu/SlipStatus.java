package dev.slipstream.gpu;

/**
 * Status codes of the native library ({@code slip_status} in {@code native/include/slipstream/abi.h}).
 * The ordinal is the code; {@code SlipNativeTest} checks every name against the library's own
 * {@code slip_status_name}.
 */
public enum SlipStatus {
  SLIP_OK,
  SLIP_ERR_INVALID_ARG,
  SLIP_ERR_NO_DEVICE,
  SLIP_ERR_CUDA,
  SLIP_ERR_OS,
  SLIP_ERR_NO_MEMORY,
  SLIP_ERR_BAD_REGION,
  SLIP_ERR_BAD_KEY,
  SLIP_ERR_OUT_OF_RANGE,
  SLIP_ERR_BAD_DESCRIPTOR,
  SLIP_ERR_QUEUE_FULL,
  SLIP_ERR_TIMEOUT,
  SLIP_ERR_UNSUPPORTED,
  SLIP_ERR_STATE,
  SLIP_ERR_PEER;

  private static final SlipStatus[] BY_CODE = values();

  public int code() {
    return ordinal();
  }

  /** The status for a native code; fails with the code for one this build does not know. */
  public static SlipStatus of(int code) {
    if (code < 0 || code >= BY_CODE.length) {
      throw new IllegalArgumentException("native status code " + code + ", expected 0.." + (BY_CODE.length - 1));
    }
    return BY_CODE[code];
  }
}
