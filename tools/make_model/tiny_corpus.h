// Training text for the tiny tokenizer: plain English about everyday things
// and about language models, written for this project.
#pragma once

namespace tandem::tools {

inline constexpr const char* kTinyCorpus =
    R"(The quick brown fox jumps over the lazy dog. The dog was not happy about it, and the fox ran into the forest.
Hello, world! This is a small model that can write text. It is not very smart, but it is fast.
What is the capital of France? The capital of France is Paris. What is the capital of Germany? It is Berlin.
You are a helpful assistant. The user asks a question and the assistant gives an answer.
Can you tell me a story about a cat and a dog? Once upon a time there was a cat who lived in a small house with a dog.
They would play in the garden every day, and in the evening they would sleep by the fire.
The weather today is sunny with a chance of rain in the afternoon. Tomorrow it will be cold and windy.
I think that we should go to the market and buy some bread, milk, eggs and apples for the week.
There are 7 days in a week, 12 months in a year, and 365 days in most years.
The model reads the prompt, then it writes one token at a time until it sees the end of the text.
Please write a short poem about the sea. The sea is blue and deep, the waves are loud, the wind is free.
How are you doing today? I am doing well, thank you for asking. How about you?
This is the first time that I have been here, and I would like to come back again with my family.
When the sun goes down, the light of the moon shines on the water and the stars come out one by one.
People have been telling stories for thousands of years, and every story has a beginning, a middle and an end.
It was the best of times and the worst of times; we had everything before us and nothing before us.
A computer program is a list of instructions. The program runs on a machine, and the machine does what the program says.
Where is the nearest train station? Go straight ahead, then turn left at the second street, and it is on your right.
She said that she would call him in the morning, but she forgot, and he waited all day for the phone to ring.
Water boils at 100 degrees and freezes at 0 degrees. Ice is water that has become solid.
Learning a new language takes time, but if you practice every day you will get better and better.
The children were playing in the park while their parents were talking on the bench under the old tree.
Thank you very much for your help. You are welcome, it was my pleasure. Have a nice day!
The system is ready. The user is waiting. The assistant is thinking about what to say next.
)";

}  // namespace tandem::tools
