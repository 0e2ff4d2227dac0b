"""The inference engine over llama.cpp's C API (no HTTP, no RAG inside)."""

from appliance.engine.errors import EngineError, EngineOverloaded, EngineStopped, PromptTooLong
from appliance.engine.request import Request, Result
from appliance.engine.sequence import SamplingParams, Stats

__all__ = ["EngineError", "EngineOverloaded", "EngineStopped", "PromptTooLong", "Request",
           "Result", "SamplingParams", "Stats"]
