// The page: a canvas to draw on, the model's reading of it, and its ten probabilities. The model
// (./model/, written by mnist-web.py) takes 28x28 pixels from 0 (black) to 1 (white) and returns
// the probabilities; here the drawing is made to look like an MNIST digit first: its bounding
// box scaled into 20x20 pixels, then centred on its centre of mass in 28x28, as MNIST's were.
import { load } from "./model/burnish.js";

const pad = document.getElementById("pad");
const pen = pad.getContext("2d");
const bars = document.getElementById("bars");
const guess = document.getElementById("guess");
const status = document.getElementById("status");

const rows = [];
for (let d = 0; d < 10; d++) {
  const row = document.createElement("div");
  row.className = "row";
  row.innerHTML = `<span class="digit">${d}</span><span class="bar"></span>` +
    `<span class="value"></span>`;
  bars.appendChild(row);
  rows.push(row);
}

function clear() {
  pen.fillStyle = "#000";
  pen.fillRect(0, 0, pad.width, pad.height);
  guess.textContent = "";
  for (const row of rows) {
    row.classList.remove("best");
    row.querySelector(".bar").style.width = "1px";
    row.querySelector(".value").textContent = "";
  }
}

/** The drawing as MNIST's 28x28 pixels in [0, 1], or null when nothing is drawn. */
function pixels() {
  const { data, width, height } = pen.getImageData(0, 0, pad.width, pad.height);
  let top = height, left = width, bottom = -1, right = -1;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      if (data[(y * width + x) * 4] > 32) {
        top = Math.min(top, y); bottom = Math.max(bottom, y);
        left = Math.min(left, x); right = Math.max(right, x);
      }
    }
  }
  if (bottom < 0) return null;
  const w = right - left + 1, h = bottom - top + 1;
  const scale = 20 / Math.max(w, h);
  const small = document.createElement("canvas");
  small.width = small.height = 28;
  const ctx = small.getContext("2d");
  ctx.fillStyle = "#000";
  ctx.fillRect(0, 0, 28, 28);
  ctx.imageSmoothingQuality = "high";
  ctx.drawImage(pad, left, top, w, h, (28 - w * scale) / 2, (28 - h * scale) / 2,
    w * scale, h * scale);
  const grey = ctx.getImageData(0, 0, 28, 28).data;
  const values = new Float32Array(28 * 28);
  let mass = 0, cx = 0, cy = 0;
  for (let i = 0; i < 28 * 28; i++) {
    const v = grey[i * 4] / 255;
    values[i] = v; mass += v; cx += v * (i % 28); cy += v * Math.floor(i / 28);
  }
  // Shift by whole pixels so that the centre of mass lands on the middle.
  const dx = Math.round(13.5 - cx / mass), dy = Math.round(13.5 - cy / mass);
  const centred = new Float32Array(28 * 28);
  for (let y = 0; y < 28; y++) {
    for (let x = 0; x < 28; x++) {
      const sx = x - dx, sy = y - dy;
      if (sx >= 0 && sx < 28 && sy >= 0 && sy < 28) centred[y * 28 + x] = values[sy * 28 + sx];
    }
  }
  return centred;
}

function show(probabilities) {
  let best = 0;
  for (let d = 1; d < 10; d++) if (probabilities[d] > probabilities[best]) best = d;
  guess.textContent = String(best);
  rows.forEach((row, d) => {
    row.classList.toggle("best", d === best);
    row.querySelector(".bar").style.width = `${Math.max(1, probabilities[d] * 260)}px`;
    row.querySelector(".value").textContent = `${(probabilities[d] * 100).toFixed(1)}%`;
  });
}

// What the page read last, for anyone checking it (the example's test does).
const demo = (window.mnistDemo = { model: null, pixels: null, probabilities: null, runs: 0 });
let busy = false, again = false;

async function read() {
  if (!demo.model) return;
  if (busy) { again = true; return; }
  busy = true;
  try {
    do {
      again = false;
      const input = pixels();
      if (!input) continue;
      const [probabilities] = await demo.model.run(input);
      demo.pixels = Array.from(input);
      demo.probabilities = Array.from(probabilities);
      demo.runs++;
      show(probabilities);
    } while (again);
  } finally {
    busy = false;
  }
}

let drawing = false, last = null;
pad.addEventListener("pointerdown", (e) => {
  drawing = true;
  last = [e.offsetX, e.offsetY];
  pad.setPointerCapture(e.pointerId);
});
pad.addEventListener("pointermove", (e) => {
  if (!drawing) return;
  pen.strokeStyle = "#fff";
  pen.lineWidth = 22;
  pen.lineCap = pen.lineJoin = "round";
  pen.beginPath();
  pen.moveTo(...last);
  pen.lineTo(e.offsetX, e.offsetY);
  pen.stroke();
  last = [e.offsetX, e.offsetY];
  read();
});
for (const type of ["pointerup", "pointercancel"]) {
  pad.addEventListener(type, () => { if (drawing) { drawing = false; read(); } });
}
document.getElementById("clear").addEventListener("click", clear);
clear();

demo.ready = load("./model/").then((model) => {
  demo.model = model;
  status.textContent = model.backend === "webgpu"
    ? "The model runs on the GPU through WebGPU."
    : "This browser has no WebGPU: the model runs on the CPU in JavaScript.";
  return model.backend;
}, (error) => {
  status.textContent = `The model could not be loaded: ${error.message}`;
  throw error;
});
