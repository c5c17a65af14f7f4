"""Live recording of the generation DAG inside LLM frameworks (docs/adapters.md).

* `veritrail.integrations.langchain.DagCallbackHandler`: a langchain-core callback handler
  (``pip install 'veritrail[langchain]'``);
* `veritrail.integrations.llamaindex.DagEventHandler`: a LlamaIndex instrumentation event handler
  (``pip install 'veritrail[llamaindex]'``).

Both record what they see as trace spans and build the DAG with the same rules as
``veritrail from-trace`` (`veritrail.adapters.trace`), so a pipeline gives the same DAG whether
it was traced to a file and imported or recorded live. Each module imports its framework on
import and raises an ImportError naming the extra when it is missing.
"""
