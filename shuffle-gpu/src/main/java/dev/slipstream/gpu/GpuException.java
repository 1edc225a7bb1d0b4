package dev.slipstream.gpu;

/** A failure reported by the native library or the CUDA driver, with its status and text. */
public final class GpuException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final SlipStatus status;

  public GpuException(SlipStatus status, String message) {
    super(message);
    this.status = status;
  }

  public GpuException(SlipStatus status, String message, Throwable cause) {
    super(message, cause);
    this.status = status;
  }

  public SlipStatus status() {
    return status;
  }
}
