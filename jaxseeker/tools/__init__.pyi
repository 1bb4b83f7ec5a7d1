"""Names `jaxseeker.tools` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .address import check_url
from .answer import answer_submit_tool
from .base import Tool, ToolError, ToolRegistry, ToolResult
from .build import build_registry
from .config import UNSAFE_PYTHON_HELP, ToolsConfig, tools_config, tools_mapping, unsafe_python
from .http import HttpConfig, HttpError
from .llm_client import ChatResult, LLMClient, LLMConfig, LLMError
from .python_exec import PythonConfig, python_tool, run_python
from .sandbox import SandboxUnavailable
from .search import LocalSearch, SearchBackend, SerperSearch, search_tool
from .visit import JinaReader, LocalPages, PageReader, VisitOptions, visit_tool

__all__ = [
    "ChatResult",
    "HttpConfig",
    "HttpError",
    "JinaReader",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "LocalPages",
    "LocalSearch",
    "PageReader",
    "PythonConfig",
    "SandboxUnavailable",
    "SearchBackend",
    "SerperSearch",
    "Tool",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "ToolsConfig",
    "VisitOptions",
    "answer_submit_tool",
    "build_registry",
    "UNSAFE_PYTHON_HELP",
    "check_url",
    "python_tool",
    "run_python",
    "search_tool",
    "tools_config",
    "tools_mapping",
    "unsafe_python",
    "visit_tool",
]
