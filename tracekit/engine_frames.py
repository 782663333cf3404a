"""The serving engines' step functions as Python stack frames name them.

Kineto ``python_function`` rows (and torch_npu Python ops) read
``vllm/v1/worker/gpu_model_runner.py(3380): execute_model``. These few rows mark engine steps,
so parsers keep them even when they drop the other Python rows, and ``tracekit.steps`` takes
them for step markers. Sources: vLLM V1 ``GPUModelRunner`` / ``Worker.execute_model``
(``vllm/v1/worker/gpu_model_runner.py``, ``gpu_worker.py``, ``gpu/model_runner.py``), V0
``vllm/worker/model_runner.py``, vllm-ascend ``NPUModelRunner``
(``vllm_ascend/worker/model_runner_v1.py``), SGLang ``Scheduler.run_batch``
(``python/sglang/srt/managers/scheduler.py``), TensorRT-LLM ``PyExecutor._forward_step``
(``tensorrt_llm/_torch/pyexecutor/py_executor.py``).
"""

STEP_FUNCTIONS = (
    r"((model_runner|worker)[\w/.-]*\.py\(\d+\): execute_model"
    r"|managers/scheduler\.py\(\d+\): run_batch"
    r"|pyexecutor/py_executor\.py\(\d+\): _forward_step)$"
)
