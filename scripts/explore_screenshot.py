"""Serve `hf-attn explore`, read a review in headless Chromium and save a screenshot of the page (docs/explore.png).

    python scripts/explore_screenshot.py --model checkpoints/rope-whole-reviews --output docs/explore.png

Needs the `app` extra, selenium, and Debian's `chromium` and `chromium-driver`. tests/test_explore.py drives
the page with the same functions.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(models: list[str], port: int, timeout: float = 120.0) -> subprocess.Popen:
    """`hf-attn explore` on `models` in a child process, once its page answers on 127.0.0.1:`port`."""
    command = [sys.executable, "-m", "hf_attn.cli", "explore", "--port", str(port)]
    for model in models:
        command += ["--model", model]
    env = {**os.environ, "PYTHONPATH": str(REPO), "GRADIO_ANALYTICS_ENABLED": "False"}
    server = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"hf-attn explore stopped: {server.stdout.read()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2):
                return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise TimeoutError(f"hf-attn explore did not answer on port {port} within {timeout:.0f} s")


def headless_chromium(width: int = 1400, height: int = 3300) -> webdriver.Chrome:
    """Debian's chromium through its chromedriver, headless, with the network log on (to see every request)."""
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     f"--window-size={width},{height}"):
        options.add_argument(argument)
    options.binary_location = "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(options=options, service=webdriver.ChromeService("/usr/bin/chromedriver"))


def read_in_browser(driver: webdriver.Chrome, url: str, text: str, timeout: float = 60.0) -> str:
    """Open the page, wait until every classifier is loaded, type `text`, press Read and return the verdict
    table's text (or the error line's, when the page answers with one)."""
    driver.get(url)
    wait = WebDriverWait(driver, timeout)
    wait.until(lambda page: "loading" not in page.find_element(By.ID, "status").text)
    box = wait.until(expected_conditions.element_to_be_clickable((By.CSS_SELECTOR, "#review textarea")))
    box.clear()
    driver.execute_script(  # typing 10,000 characters key by key takes a minute; set the value, then say so
        "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input', {bubbles: true}));",
        box, text)
    driver.find_element(By.ID, "read").click()
    wait.until(lambda page: page.find_element(By.ID, "verdicts").text.strip()
               or page.find_element(By.ID, "error").text.strip())
    return driver.find_element(By.ID, "verdicts").text.strip() or driver.find_element(By.ID, "error").text.strip()


def requested_hosts(driver: webdriver.Chrome) -> set[str]:
    """The hosts of every request the page has made so far (from the performance log)."""
    hosts = set()
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            url = message["params"]["request"]["url"]
            if url.startswith("http"):
                hosts.add(url.split("/")[2].split(":")[0])
    return hosts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True, help="a classifier folder; repeat for several")
    parser.add_argument("--output", default="docs/explore.png", help="where the screenshot goes")
    parser.add_argument("--sample", default="long", help="the sample read: 'long' or a hard review's number 1-6")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from hf_attn.explore.analysis import sample_texts

    samples = list(sample_texts().values())
    text = samples[-1] if args.sample == "long" else samples[int(args.sample) - 1]
    port = free_port()
    server = serve(args.model, port)
    driver = headless_chromium()
    try:
        print(read_in_browser(driver, f"http://127.0.0.1:{port}/", text))
        WebDriverWait(driver, 120).until(lambda page: page.find_elements(By.CSS_SELECTOR, "#heatmap img")
                                         and page.find_elements(By.CSS_SELECTOR, "#scheme img"))
        time.sleep(2)  # the images' own loading and the layout settling
        driver.save_screenshot(args.output)
        print(f"screenshot in {args.output}; hosts requested: {sorted(requested_hosts(driver))}")
    finally:
        driver.quit()
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
