"""The Run page's form under streamlit.testing.v1.AppTest, filled and read as a user does."""

import re


def fill_run_form(at, model: str = "fashion_mnist_cnn", device: str = "cpu", **numbers):
    """Pick the workload and the device, and type each number box given (`batch_size=4` types into the box
    keyed `run_batch_size`); nothing is sent until a launch button is clicked."""
    at.selectbox(key="run_model").set_value(model)
    at.selectbox(key="run_device").set_value(device)
    for name, value in numbers.items():
        at.number_input(key=f"run_{name}").set_value(value)
    return at


def shown_errors(at) -> list[str]:
    """The error lines as the page reads, markdown escapes and word breaks aside."""
    return [re.sub(r"\\(.)", r"\1", e.value.replace("\u200b", "")) for e in at.error]
