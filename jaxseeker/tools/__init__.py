"""Tools the agent calls (search, visit, python, answer_submit), their local and HTTP back-ends, and an LLM client."""

from jaxseeker.tools.answer import answer_submit_tool
from jaxseeker.tools.base import Tool, ToolError, ToolRegistry, ToolResult
from jaxseeker.tools.build import build_registry
from jaxseeker.tools.config import ToolsConfig, tools_config
from jaxseeker.tools.http import HttpConfig, HttpError
from jaxseeker.tools.llm_client import ChatResult, LLMClient, LLMConfig, LLMError
from jaxseeker.tools.python_exec import PythonConfig, python_tool, run_python
from jaxseeker.tools.search import LocalSearch, SearchBackend, SerperSearch, search_tool
from jaxseeker.tools.visit import JinaReader, LocalPages, PageReader, VisitOptions, check_url, visit_tool

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
    "check_url",
    "python_tool",
    "run_python",
    "search_tool",
    "tools_config",
    "visit_tool",
]
