// js-typed: a plain component in JavaScript (componentize-js), with its own
// WIT (wit/weather.wit) and no hangar:plugin world: Hangar serves its
// exported functions as tools with schemas from their WIT types.
// Built WITH wasi:http (no `-d http`), so `fetch()` goes out through the
// host's grants:
//   node node_modules/@bytecodealliance/componentize-js/src/cli.js app.js \
//     --wit wit --world-name js-typed -d fetch-event -o js-typed.wasm

const TABLE = {
  Paris: { celsius: 18.5, conditions: ["cloudy", "light rain"], wind: 12 },
  Cairo: { celsius: 35, conditions: ["sunny"], wind: undefined },
};

export const weather = {
  getWeather(city, units) {
    const row = TABLE[city];
    if (row === undefined) {
      // The err case of result<report, string>: the thrown string.
      throw `unknown city: ${city}`;
    }
    const temperature = units === "imperial" ? row.celsius * 9 / 5 + 32 : row.celsius;
    return { city, temperature, units, conditions: row.conditions, wind: row.wind };
  },
};

export async function fetch(url) {
  let response;
  try {
    response = await globalThis.fetch(url);
  } catch (e) {
    // A request the host refused (no grant) lands here.
    throw `request failed: ${e}`;
  }
  const body = await response.text();
  if (!response.ok) {
    throw `status ${response.status}`;
  }
  return body;
}
