'use strict';
// Errors of the package: plain Error objects whose `code` is the core's
// result name (maelys_executor_result_name: 'ARGUMENT', 'STATE',
// 'CAPABILITY', ...) and whose message is the diagnostic, as the addon
// throws them.

function fail(code, message) {
  const error = new Error(message);
  error.code = code;
  return error;
}

// Refuses what JSON.stringify would silently drop or change (undefined,
// functions, symbols, non-finite numbers, objects with a prototype of their
// own), naming the member in the plan's JSON path vocabulary ("$.rules[0]").
function assertJson(value, path, seen = new Set()) {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) {
        throw fail('ARGUMENT', `plan JSON ${path}: ${value} has no JSON form`);
      }
      return;
    case 'object': {
      if (value === null) return;
      if (seen.has(value)) throw fail('ARGUMENT', `plan JSON ${path}: is circular`);
      seen.add(value);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) assertJson(value[i], `${path}[${i}]`, seen);
      } else {
        const proto = Object.getPrototypeOf(value);
        if (proto !== Object.prototype && proto !== null) {
          throw fail('ARGUMENT', `plan JSON ${path}: must be a plain object, an array or a JSON value`);
        }
        for (const key of Object.keys(value)) assertJson(value[key], `${path}.${key}`, seen);
      }
      seen.delete(value);
      return;
    }
    default:
      throw fail(
        'ARGUMENT',
        `plan JSON ${path}: a ${typeof value} has no JSON form (the member would be silently dropped)`,
      );
  }
}

module.exports = { fail, assertJson };
