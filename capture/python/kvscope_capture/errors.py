class CaptureError(RuntimeError):
    """The recorder could not record a call (an unsupported cache, batch size,
    input...). The engine's own run is never affected: the recorder stops
    recording and says why."""
