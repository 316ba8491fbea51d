// burnish.web's runtime: runs a model exported by `python -m burnish.web export` in a browser,
// through WebGPU where the browser has it, else in plain JavaScript. No dependencies, no build
// step: an ES module.
//
//   import { load } from "./model/burnish.js";
//   const model = await load("./model/");            // { backend: "auto" | "webgpu" | "cpu" }
//   const [logits] = await model.run(new Float32Array(784));
//
// `run` takes one typed array per input (its values in row-major order) and returns one
// typed array per output, row-major; `model.inputs` and `model.outputs` give their shapes.

const FORMAT = "burnish-web";
const VERSION = 1;
const ARRAYS = { float32: Float32Array, int32: Int32Array, bool: Uint32Array };

/** Loads the exported model in the folder at `url` (relative to the page). */
export async function load(url, { backend = "auto" } = {}) {
  const base = new URL(url.endsWith("/") ? url : url + "/", location.href);
  const spec = await fetchJson(new URL("model.json", base));
  if (spec.format !== FORMAT || spec.version !== VERSION) {
    throw new Error(`burnish.web: ${base}model.json is format ${spec.format} version ` +
      `${spec.version}; this runtime reads ${FORMAT} version ${VERSION}`);
  }
  const weights = parseSafetensors(await fetchBytes(new URL(spec.weights, base)));
  if (!["auto", "webgpu", "cpu"].includes(backend)) {
    throw new Error(`burnish.web: backend must be "auto", "webgpu" or "cpu", not ${backend}`);
  }
  if (backend !== "cpu") {
    const adapter = navigator.gpu ? await navigator.gpu.requestAdapter() : null;
    if (adapter) return await GpuModel.create(spec, weights, adapter);
    if (backend === "webgpu") {
      throw new Error("burnish.web: this browser has no WebGPU adapter " +
        (navigator.gpu ? "(requestAdapter() gave none)" : "(navigator.gpu is undefined)"));
    }
  }
  const kernels = (await import(new URL(spec.cpu, base).href)).default;
  return new CpuModel(spec, weights, kernels);
}

async function fetchBytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`burnish.web: ${url}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

async function fetchJson(url) {
  return JSON.parse(new TextDecoder().decode(await fetchBytes(url)));
}

/** The tensors of a safetensors file, by name: { dtype, shape, bytes }. */
export function parseSafetensors(bytes) {
  if (bytes.length < 8) throw new Error("burnish.web: the weights file is shorter than 8 bytes");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerSize = Number(view.getBigUint64(0, true));
  if (8 + headerSize > bytes.length) {
    throw new Error(`burnish.web: the weights file's header says ${headerSize} bytes; the ` +
      `file has ${bytes.length - 8} after its first 8`);
  }
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerSize)));
  const start = 8 + headerSize;
  const tensors = {};
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [a, b] = entry.data_offsets;
    if (!(0 <= a && a <= b && start + b <= bytes.length)) {
      throw new Error(`burnish.web: tensor ${name} lies outside the weights file`);
    }
    tensors[name] = { dtype: entry.dtype, shape: entry.shape, bytes: bytes.subarray(start + a, start + b) };
  }
  return tensors;
}

function initialBytes(spec, weights, entry) {
  const tensor = weights[entry.init];
  if (!tensor) throw new Error(`burnish.web: the weights file lacks ${entry.init}`);
  if (tensor.bytes.length > entry.size) {
    throw new Error(`burnish.web: ${entry.init} has ${tensor.bytes.length} bytes; its buffer ` +
      `${entry.size}`);
  }
  return tensor.bytes;
}

function checkInputs(spec, inputs) {
  if (inputs.length !== spec.inputs.length) {
    throw new Error(`burnish.web: the model takes ${spec.inputs.length} input(s); run got ` +
      `${inputs.length}`);
  }
  return inputs.map((data, i) => {
    const input = spec.inputs[i];
    const count = input.shape.reduce((a, b) => a * b, 1);
    const Array_ = ARRAYS[input.dtype];
    if (!data || data.length !== count) {
      throw new Error(`burnish.web: input ${i} must have ${count} values (shape ` +
        `[${input.shape}]); got ${data ? data.length : data}`);
    }
    return data instanceof Array_ ? data : Array_.from(data);
  });
}

/** The output `spec` (a strided view) of `words` (the whole buffer), made row-major. */
function gather(spec, words) {
  const count = spec.shape.reduce((a, b) => a * b, 1);
  const out = new ARRAYS[spec.dtype](count);
  const rank = spec.shape.length;
  const index = new Array(rank).fill(0);
  for (let n = 0; n < count; n++) {
    let at = spec.offset;
    for (let d = 0; d < rank; d++) at += index[d] * spec.strides[d];
    out[n] = words[at];
    for (let d = rank - 1; d >= 0; d--) {
      if (++index[d] < spec.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

class Model {
  constructor(spec, backend) {
    this.spec = spec;
    /** "webgpu" or "cpu": where `run` computes. */
    this.backend = backend;
    /** Each input's shape and dtype. */
    this.inputs = spec.inputs.map(({ shape, dtype }) => ({ shape, dtype }));
    /** Each output's shape and dtype. */
    this.outputs = spec.outputs.map(({ shape, dtype }) => ({ shape, dtype }));
    this.last = Promise.resolve();
  }

  /** The outputs for `inputs` (one typed array each, row-major), one typed array per output.
   * Calls run one after another: the model's buffers serve one run at a time. */
  run(...inputs) {
    const result = this.last.then(() => this.compute(inputs));
    this.last = result.catch(() => {});
    return result;
  }
}

class GpuModel extends Model {
  static async create(spec, weights, adapter) {
    const wanted = ["maxStorageBuffersPerShaderStage", "maxStorageBufferBindingSize",
      "maxBufferSize", "maxComputeWorkgroupStorageSize", "maxComputeInvocationsPerWorkgroup",
      "maxComputeWorkgroupSizeX"];
    const requiredLimits = {};
    for (const name of wanted) {
      if (adapter.limits[name] !== undefined) requiredLimits[name] = adapter.limits[name];
    }
    const most = adapter.limits.maxStorageBuffersPerShaderStage;
    for (const kernel of spec.kernels) {  // its buffers and its metadata
      if (kernel.bindings.length + 1 > most) {
        throw new Error(`burnish.web: kernel ${kernel.name} binds ` +
          `${kernel.bindings.length + 1} storage buffers; this adapter allows ${most}`);
      }
    }
    const device = await adapter.requestDevice({ requiredLimits });
    const model = new GpuModel(spec, device);
    await model.prepare(weights);
    return model;
  }

  constructor(spec, device) {
    super(spec, "webgpu");
    this.device = device;
  }

  async prepare(weights) {
    const { device, spec } = this;
    const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
    device.pushErrorScope("validation");
    this.buffers = spec.buffers.map((entry) => {
      const buffer = device.createBuffer({ size: Math.max(entry.size, 16), usage });
      if (entry.init !== undefined) {
        const bytes = initialBytes(spec, weights, entry);
        const padded = new Uint8Array(Math.ceil(bytes.length / 4) * 4);
        padded.set(bytes);
        device.queue.writeBuffer(buffer, 0, padded);
      }
      return buffer;
    });
    const pipelines = [];
    for (const kernel of spec.kernels) {
      const module = device.createShaderModule({ code: kernel.wgsl });
      const info = await module.getCompilationInfo();
      const errors = info.messages.filter((m) => m.type === "error");
      if (errors.length) {
        throw new Error(`burnish.web: kernel ${kernel.name} does not compile here: ` +
          errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join("; "));
      }
      const entries = kernel.bindings.map((b, i) => ({ binding: i,
        visibility: GPUShaderStage.COMPUTE,
        buffer: { type: b.writable ? "storage" : "read-only-storage" } }));
      entries.push({ binding: kernel.bindings.length, visibility: GPUShaderStage.COMPUTE,
        buffer: { type: "read-only-storage" } });
      const layout = device.createBindGroupLayout({ entries });
      const pipeline = await device.createComputePipelineAsync({
        layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
        compute: { module, entryPoint: kernel.name } });
      pipelines.push({ pipeline, layout });
    }
    // Every launch's metadata and bind group, made once.
    this.steps = spec.commands.map((command) => {
      if (command.op === "launch") {
        const { pipeline, layout } = pipelines[command.kernel];
        const words = new Int32Array(command.info.length ? command.info : [0]);
        const info = device.createBuffer({ size: Math.max(words.byteLength, 16),
          usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
        device.queue.writeBuffer(info, 0, words);
        const entries = command.buffers.map((b, i) => ({ binding: i,
          resource: { buffer: this.buffers[b] } }));
        entries.push({ binding: command.buffers.length, resource: { buffer: info } });
        return { pipeline, group: device.createBindGroup({ layout, entries }),
          groups: command.groups };
      }
      if (command.op === "write") {  // in order with the launches: a copy from a staging buffer
        const bytes = weights[command.data].bytes;
        const staging = device.createBuffer({ size: Math.max(bytes.length, 4),
          usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
        device.queue.writeBuffer(staging, 0, bytes);
        return { copy: [staging, 0, this.buffers[command.buffer], command.offset, bytes.length] };
      }
      return { copy: [this.buffers[command.src], command.src_offset, this.buffers[command.dst],
        command.dst_offset, command.size] };
    });
    this.readers = spec.outputs.map((output) => device.createBuffer({
      size: this.buffers[output.buffer].size,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }));
    const error = await device.popErrorScope();
    if (error) throw new Error(`burnish.web: WebGPU refused the model: ${error.message}`);
  }

  async compute(inputs) {
    const { device, spec } = this;
    const data = checkInputs(spec, inputs);
    data.forEach((values, i) => {
      const input = spec.inputs[i];
      device.queue.writeBuffer(this.buffers[input.buffer], input.offset, values);
    });
    const encoder = device.createCommandEncoder();
    let pass = null;
    for (const step of this.steps) {
      if (step.copy) {
        if (pass) { pass.end(); pass = null; }
        encoder.copyBufferToBuffer(...step.copy);
        continue;
      }
      if (!pass) pass = encoder.beginComputePass();
      pass.setPipeline(step.pipeline);
      pass.setBindGroup(0, step.group);
      pass.dispatchWorkgroups(...step.groups);
    }
    if (pass) pass.end();
    spec.outputs.forEach((output, i) => {
      encoder.copyBufferToBuffer(this.buffers[output.buffer], 0, this.readers[i], 0,
        this.readers[i].size);
    });
    device.pushErrorScope("validation");
    device.queue.submit([encoder.finish()]);
    const error = await device.popErrorScope();
    if (error) throw new Error(`burnish.web: WebGPU refused a launch: ${error.message}`);
    const results = [];
    for (let i = 0; i < spec.outputs.length; i++) {
      const reader = this.readers[i];
      await reader.mapAsync(GPUMapMode.READ);
      const words = new ARRAYS[spec.outputs[i].dtype](reader.getMappedRange().slice(0));
      reader.unmap();
      results.push(gather(spec.outputs[i], words));
    }
    return results;
  }
}

class CpuModel extends Model {
  constructor(spec, weights, kernels) {
    super(spec, "cpu");
    spec.kernels.forEach((kernel, i) => {
      if (!kernels[i]) {
        throw new Error(`burnish.web: kernel ${kernel.name} has hand-written WGSL and no ` +
          "JavaScript form: this model needs WebGPU");
      }
    });
    this.kernels = kernels;
    this.memory = spec.buffers.map((entry) => {
      const bytes = new Uint8Array(Math.max(entry.size, 16));
      if (entry.init !== undefined) bytes.set(initialBytes(spec, weights, entry));
      return bytes;
    });
    this.views = this.memory.map((bytes) => ({
      Float32Array: new Float32Array(bytes.buffer), Int32Array: new Int32Array(bytes.buffer),
      Uint32Array: new Uint32Array(bytes.buffer) }));
    this.steps = spec.commands.map((command) => {
      if (command.op === "launch") {
        const kernel = spec.kernels[command.kernel];
        return { fn: kernels[command.kernel], info: new Int32Array(command.info),
          groups: command.groups,
          buffers: command.buffers.map((b, i) => this.views[b][kernel.bindings[i].array]) };
      }
      if (command.op === "write") {
        return { copy: [weights[command.data].bytes, this.memory[command.buffer],
          command.offset] };
      }
      return { copy: [this.memory[command.src].subarray(command.src_offset,
        command.src_offset + command.size), this.memory[command.dst], command.dst_offset] };
    });
  }

  async compute(inputs) {
    const { spec } = this;
    const data = checkInputs(spec, inputs);
    data.forEach((values, i) => {
      const input = spec.inputs[i];
      this.memory[input.buffer].set(new Uint8Array(values.buffer, values.byteOffset,
        values.byteLength), input.offset);
    });
    for (const step of this.steps) {
      if (step.copy) {
        const [source, target, offset] = step.copy;
        target.set(source.slice(), offset);
        continue;
      }
      step.fn(step.buffers, step.info, ...step.groups);
    }
    return spec.outputs.map((output) => gather(output,
      this.views[output.buffer][ARRAYS[output.dtype].name]));
  }
}
